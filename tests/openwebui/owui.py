"""How Open WebUI loads and calls plugin files, reduced to what the tests need. Follows Open
WebUI's backend (utils/plugin.py, utils/actions.py, utils/tools.py) so that a plugin that loads
and runs here loads and runs there:

- the front matter is the `key: value` lines of a docstring whose first line is exactly `\"\"\"`;
- a few import prefixes are rewritten (`from utils` -> `from open_webui.utils`, ...) anywhere in
  the text before it is executed in a fresh module;
- valves are set as `module.valves = module.Valves(**saved)`;
- an Action's `action` gets `body` and, of `__user__`, `__event_emitter__`, `__event_call__`,
  `__model__`, `__request__`, `__id__`, those its signature names;
- every callable attribute of a Tools instance whose name does not start with `__` (and that
  is not a class) becomes a tool; its reserved `__x__` parameters are filled in the same way.

What Open WebUI then does with the plugins' events (the saved chat, the open page, what its
renderer shows, on 0.10.2 and on 0.6-0.9) is reduced in owui_chat.py.
"""

import asyncio
import copy
import inspect
import re
import sys
import time
import types
import typing
import uuid

_IMPORT_REWRITES = {
    "from utils": "from open_webui.utils",
    "from apps": "from open_webui.apps",
    "from main": "from open_webui.main",
    "from config": "from open_webui.config",
}


def extract_frontmatter(content: str) -> dict:
    lines = content.splitlines()
    if not lines or lines[0].strip() != '"""':
        return {}
    pattern = re.compile(r"^\s*([a-z_]+):\s*(.*)\s*$", re.IGNORECASE)
    front = {}
    for line in lines[1:]:
        if '"""' in line:
            break
        m = pattern.match(line)
        if m:
            front[m.group(1).strip()] = m.group(2).strip()
    return front


def replace_imports(content: str) -> str:
    for old, new in _IMPORT_REWRITES.items():
        content = content.replace(old, new)
    return content


def load_plugin(path: str, class_name: str):
    """(instance of class_name, module, front matter) as Open WebUI creates them."""
    with open(path, encoding="utf-8") as f:
        content = replace_imports(f.read())
    module_name = f"owui_plugin_{uuid.uuid4().hex[:8]}"
    module = types.ModuleType(module_name)
    module.__dict__["__file__"] = path
    sys.modules[module_name] = module
    exec(compile(content, path, "exec"), module.__dict__)
    return getattr(module, class_name)(), module, extract_frontmatter(content)


def set_valves(instance, **values):
    instance.valves = instance.Valves(**values)


def tool_functions(tools) -> dict:
    """name -> bound method, exactly the methods Open WebUI offers the model."""
    return {
        name: getattr(tools, name)
        for name in dir(tools)
        if callable(getattr(tools, name))
        and not name.startswith("__")
        and not inspect.isclass(getattr(tools, name))
    }


def tool_spec(function) -> dict:
    """The parts of Open WebUI's tool spec the tests check: description (docstring up to the
    first :param), parameters with their type hints and :param descriptions, required ones."""
    doc = inspect.getdoc(function) or ""
    description = re.split(r":(param|return)", doc, maxsplit=1)[0].strip()
    descriptions = dict(re.findall(r":param (\w+):\s*(.+)", doc))
    hints = typing.get_type_hints(function)
    params, required = {}, []
    for name, p in inspect.signature(function).parameters.items():
        if name.startswith("__"):
            continue
        params[name] = {"type": hints.get(name), "description": descriptions.get(name)}
        if p.default is inspect.Parameter.empty:
            required.append(name)
    return {"name": function.__name__, "description": description, "parameters": params,
            "required": required}


class Recorder:
    """An __event_emitter__ that records every event (deep copies, with a timestamp)."""

    def __init__(self):
        self.events = []
        self.times = []  # time.monotonic() of each event

    async def __call__(self, event: dict):
        self.events.append(copy.deepcopy(event))
        self.times.append(time.monotonic())

    def of_type(self, type_: str) -> list:
        return [e["data"] for e in self.events if e.get("type") == type_]

    def statuses(self) -> list:
        return self.of_type("status")

    def code_executions(self) -> list:
        return [d for d in self.of_type("source") if d.get("type") == "code_execution"]

    def final_code_executions(self) -> dict:
        """id -> last version, as Open WebUI's chat shows them (a later event replaces)."""
        latest = {}
        for d in self.code_executions():
            latest[d["id"]] = d
        return latest

    def appended(self) -> str:
        return "".join(d.get("content", "") for d in self.of_type("message"))


async def _never_called(event):
    raise AssertionError(f"the plugin asked the user something: {event}")


def action_body(markdown: str, chat_id: str, model: str = "llama3.1:8b") -> dict:
    """The body Open WebUI's chat page posts when a user clicks an action button under the
    last answer (Chat.svelte chatActionHandler)."""
    now = int(time.time())
    user_msg, answer = str(uuid.uuid4()), str(uuid.uuid4())
    return {
        "model": model,
        "messages": [
            {"id": user_msg, "role": "user", "content": "Write and run the code, please.",
             "timestamp": now - 5},
            {"id": answer, "role": "assistant", "content": markdown,
             "info": {"total_duration": 1234567}, "timestamp": now},
        ],
        "model_item": {"id": model, "name": model, "owned_by": "ollama"},
        "chat_id": chat_id,
        "session_id": "s0ck3t1d",
        "id": answer,
    }


def user(user_id: str = None) -> dict:
    uid = user_id or str(uuid.uuid4())
    return {"id": uid, "email": "ada@example.org", "name": "Ada", "role": "user"}


async def call_action(action, body: dict, user_dict: dict, emitter, event_call=None,
                      request=None) -> object:
    """Calls action.action as Open WebUI's chat_action does."""
    sig = inspect.signature(action.action)
    extra = {
        "__model__": body.get("model_item"),
        "__id__": "sandrun_action",
        "__event_emitter__": emitter,
        "__event_call__": event_call or _never_called,
        "__request__": request,
    }
    params = {"body": body, **{k: v for k, v in extra.items() if k in sig.parameters}}
    if "__user__" in sig.parameters:
        params["__user__"] = user_dict
    return await action.action(**params)


async def call_tool(tools, name: str, args: dict, user_dict: dict, chat_id: str, emitter,
                    message_id: str = None, request=None) -> object:
    """Calls one tool as Open WebUI's get_tools/middleware do: the model's arguments plus the
    reserved parameters its signature names."""
    function = tool_functions(tools)[name]
    message_id = message_id or str(uuid.uuid4())
    extra = {
        "__request__": request,
        "__event_emitter__": emitter,
        "__event_call__": _never_called,
        "__user__": user_dict,
        "__metadata__": {"user_id": user_dict["id"], "chat_id": chat_id,
                         "message_id": message_id, "session_id": "s0ck3t1d",
                         "features": {}, "variables": {}},
        "__messages__": [],
        "__files__": [],
        "__model__": {"id": "llama3.1:8b"},
        "__chat_id__": chat_id,
        "__session_id__": "s0ck3t1d",
        "__message_id__": message_id,
        "__id__": "sandrun",
    }
    sig = inspect.signature(function)
    kwargs = {**args, **{k: v for k, v in extra.items() if k in sig.parameters}}
    result = function(**kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result


def run(coroutine):
    return asyncio.run(coroutine)


def entry_updates(events: list, times: list, entry_id: str = None) -> list:
    """(time, data) of each code execution entry event for `entry_id` (default: the first
    entry's id), in the order the chat got them."""
    updates = [(t, e["data"]) for e, t in zip(events, times)
               if e.get("type") == "source" and e["data"].get("type") == "code_execution"]
    entry_id = entry_id or (updates[0][1]["id"] if updates else None)
    return [(t, d) for t, d in updates if d["id"] == entry_id]


# A live update is at most this often (the plugins' PROGRESS_INTERVAL_S is 1 s; the bound is
# left loose for a busy machine's timer slack, and is far from the 0 s of an unthrottled flood).
MIN_LIVE_GAP_S = 0.8


def check_live_updates(case, updates: list, partial: str, later: str) -> list:
    """The updates of one code execution entry showed its output while it ran: at least one,
    before the last (the result), has `partial` and not yet `later`; they came at most about
    once a second and never twice the same; the last has both. Returns the live updates."""
    live = [(t, d) for t, d in updates[:-1] if d.get("result")]
    outputs = [d["result"]["output"] for _, d in live]
    case.assertTrue(any(partial in o and later not in o for o in outputs),
                    f"no update with {partial!r} before {later!r}: {outputs}")
    gaps = [round(b[0] - a[0], 3) for a, b in zip(live, live[1:])]
    case.assertTrue(all(g >= MIN_LIVE_GAP_S for g in gaps), gaps)
    shown = [d for _, d in live]
    case.assertTrue(all(a != b for a, b in zip(shown, shown[1:])), "an unchanged update")
    final = updates[-1][1]
    case.assertNotIn("running", final["name"])
    case.assertIn(partial, final["result"]["output"])
    case.assertIn(later, final["result"]["output"])
    return live
