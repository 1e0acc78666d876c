"""What Open WebUI does with a plugin's events and where its chat page looks, reduced to what
the tests need: one server (its saved chats, its file store, its event emitter) and one open
browser tab (the chat page's copy of the chat, its event handler, its save after an action).
Written from Open WebUI's source, no code taken from it; each part names the file it follows.
Two versions are modelled:

- "0.10.2" (Open WebUI v0.10.2, commit ecd48e2f): an answer has structured `output` items and
  the page renders them instead of `content` when there are any; the model functions are
  coroutines; utils/files.py has get_image_url_from_base64.
- "0.9" (the 0.6-0.9 line): no `output`; the page renders `content`; the model functions are
  plain functions; no get_image_url_from_base64 is assumed (the plugins' fallback path).

Use:
    webui = OpenWebUI("0.10.2", store_dir)
    chat_id, message_id = webui.new_chat(user_id, answer_markdown, structured=True)
    tab = webui.open_tab(chat_id)                  # or none: the tab was closed
    with webui.installed():                        # `import open_webui...` finds this server
        result = run(tab.click_action(action, user))
    webui.rendered(webui.saved_message(...))       # what the page shows of a message
"""

import base64
import binascii
import contextlib
import copy
import os
import re
import sys
import time
import types
import uuid

import owui


def _is_new(version: str) -> bool:
    return tuple(int(x) for x in version.split(".")[:2]) >= (0, 10)


class FileRecord:
    def __init__(self, id_, user_id, mime, path, meta):
        self.id, self.user_id, self.mime, self.path, self.meta = id_, user_id, mime, path, meta


class _User:
    """The part of models/users.py UserModel the plugins touch: an object with `id`."""

    def __init__(self, data: dict):
        self.id = data["id"]
        self.name = data.get("name", "")
        self.email = data.get("email", "")
        self.role = data.get("role", "user")

    def model_dump(self):
        return {"id": self.id, "name": self.name, "email": self.email, "role": self.role}


class OpenWebUI:
    def __init__(self, version: str, store_dir: str):
        self.version = version
        self.new = _is_new(version)
        self.store_dir = store_dir
        self.chats: dict = {}   # chat id -> {"user_id", "chat": {"history": {...}}}
        self.users: dict = {}   # user id -> user dict
        self.files: dict = {}   # file id -> FileRecord

    # --- models/chats.py (ChatTable), reduced -------------------------------------------------

    def new_chat(self, user: dict, answer: str, structured: bool) -> tuple:
        """A chat with a question and an answer. A 0.10 answer is saved as middleware.py saves
        a completion: `output` items (a message item holding the text), `content` its text."""
        self.users[user["id"]] = user
        chat_id, question, answer_id = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
        now = int(time.time())
        reply = {"id": answer_id, "parentId": question, "childrenIds": [], "role": "assistant",
                 "content": answer, "model": "llama3.1:8b", "done": True, "timestamp": now}
        if structured:
            reply["output"] = [
                {"type": "reasoning", "id": "rs_1", "status": "completed",
                 "summary": [{"type": "summary_text", "text": "The user wants code."}]},
                {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
                 "content": [{"type": "output_text", "text": answer}]},
            ]
        messages = {
            question: {"id": question, "parentId": None, "childrenIds": [answer_id],
                       "role": "user", "content": "Write and run the code, please.",
                       "timestamp": now - 5},
            answer_id: reply,
        }
        self.chats[chat_id] = {"user_id": user["id"],
                               "chat": {"history": {"messages": messages,
                                                    "currentId": answer_id}}}
        return chat_id, answer_id

    def saved_message(self, chat_id: str, message_id: str) -> dict:
        return copy.deepcopy(self.chats[chat_id]["chat"]["history"]["messages"][message_id])

    def _get_message(self, chat_id, message_id):
        chat = self.chats.get(chat_id)
        if chat is None:
            return None
        return copy.deepcopy(chat["chat"]["history"]["messages"].get(message_id, {}))

    def _upsert_message(self, chat_id, message_id, fields):
        chat = self.chats.get(chat_id)
        if chat is None:
            return None
        messages = chat["chat"]["history"]["messages"]
        messages[message_id] = {**messages.get(message_id, {}), **copy.deepcopy(fields)}
        return chat

    def _add_status(self, chat_id, message_id, status):
        chat = self.chats.get(chat_id)
        message = chat and chat["chat"]["history"]["messages"].get(message_id)
        if message is not None:
            message.setdefault("statusHistory", []).append(copy.deepcopy(status))

    def save_history(self, chat_id: str, history: dict):
        """routers/chats.py update chat by id, as the page calls it: the page's whole history
        replaces the saved one."""
        self.chats[chat_id]["chat"]["history"] = copy.deepcopy(history)

    # --- utils/files.py get_image_url_from_base64 (routers/images.py upload_image), reduced ---

    def _store_image(self, request, data_uri, metadata, user):
        """Stores a data: URI image as a file of `user`, linked to metadata's chat message;
        returns the URL the page loads it from (files router: /api/v1/files/<id>/content)."""
        if request is None:
            raise AttributeError("no request")
        m = re.match(r"data:(image/\w+);base64,(.*)$", data_uri, re.S)
        if not m:
            return None
        try:
            data = base64.b64decode(m.group(2), validate=True)
        except binascii.Error:
            return ""
        file_id = str(uuid.uuid4())
        path = os.path.join(self.store_dir, user.id, file_id)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        self.files[file_id] = FileRecord(file_id, user.id, m.group(1), path, dict(metadata))
        return f"/api/v1/files/{file_id}/content"

    def file_by_url(self, url: str):
        m = re.fullmatch(r"/api/v1/files/([0-9a-f-]+)/content", url)
        return self.files.get(m.group(1)) if m else None

    # --- the modules a plugin imports from inside Open WebUI ----------------------------------

    @contextlib.contextmanager
    def installed(self):
        """`open_webui.models.chats` (Chats), `open_webui.models.users` (Users) and, in 0.10,
        `open_webui.utils.files` (get_image_url_from_base64) answer from this server while the
        block runs: coroutines in 0.10, plain functions before."""
        new = self.new

        def wrap(fn):
            if not new:
                return fn

            async def coroutine(*args, **kwargs):
                return fn(*args, **kwargs)
            return coroutine

        chats = types.SimpleNamespace(
            get_message_by_id_and_message_id=wrap(self._get_message),
            upsert_message_to_chat_by_id_and_message_id=wrap(self._upsert_message),
        )
        users = types.SimpleNamespace(get_user_by_id=wrap(
            lambda uid: _User(self.users[uid]) if uid in self.users else None))
        modules = {
            "open_webui": types.ModuleType("open_webui"),
            "open_webui.models": types.ModuleType("open_webui.models"),
            "open_webui.models.chats": types.ModuleType("open_webui.models.chats"),
            "open_webui.models.users": types.ModuleType("open_webui.models.users"),
            "open_webui.utils": types.ModuleType("open_webui.utils"),
        }
        modules["open_webui.models.chats"].Chats = chats
        modules["open_webui.models.users"].Users = users
        if new:
            files = modules["open_webui.utils.files"] = types.ModuleType("open_webui.utils.files")
            files.get_image_url_from_base64 = wrap(self._store_image)
        before = {name: sys.modules.get(name) for name in modules}
        sys.modules.update(modules)
        try:
            yield self
        finally:
            for name, module in before.items():
                if module is None:
                    sys.modules.pop(name, None)
                else:
                    sys.modules[name] = module

    # --- socket/main.py get_event_emitter, reduced --------------------------------------------

    def event_emitter(self, chat_id: str, message_id: str, tab=None):
        """The __event_emitter__ Open WebUI gives a plugin for one message: each event goes to
        the user's open tab (if any), then the server saves what it saves of it: `status`
        (statusHistory), `message` (content +=), `replace` (content =), `files` (the event's
        files before the saved ones), `embeds`, and `source`/`citation` without a `type`.
        Nothing else is saved by the server (a code_execution source, chat:completion): only
        the page's own save keeps it."""
        events, times = [], []

        async def emitter(event: dict):
            event = copy.deepcopy(event)
            events.append(event)
            times.append(time.monotonic())
            if tab is not None:
                tab.on_event(event)
            kind, data = event.get("type"), event.get("data") or {}
            if kind == "status":
                self._add_status(chat_id, message_id, data)
            elif kind == "message":
                saved = self._get_message(chat_id, message_id)
                if saved:
                    self._upsert_message(chat_id, message_id,
                                         {"content": saved.get("content", "") +
                                          data.get("content", "")})
            elif kind == "replace":
                self._upsert_message(chat_id, message_id, {"content": data.get("content", "")})
            elif kind == "files":
                saved = self._get_message(chat_id, message_id) or {}
                files = list(data.get("files", [])) + list(saved.get("files", []))
                self._upsert_message(chat_id, message_id, {"files": files})
            elif kind == "embeds":
                saved = self._get_message(chat_id, message_id) or {}
                embeds = list(data.get("embeds", []))
                if not data.get("replace"):
                    embeds += saved.get("embeds", [])
                self._upsert_message(chat_id, message_id, {"embeds": embeds})
            elif kind in ("source", "citation") and data.get("type") is None:
                saved = self._get_message(chat_id, message_id) or {}
                self._upsert_message(chat_id, message_id,
                                     {"sources": saved.get("sources", []) + [data]})

        emitter.events = events
        emitter.times = times  # time.monotonic() of each event, for the tests' throttle checks
        return emitter

    def open_tab(self, chat_id: str, inputs=None):
        return Tab(self, chat_id, inputs)

    # --- what the page shows of a message ------------------------------------------------------

    def rendered(self, message: dict) -> dict:
        """What ResponseMessage.svelte shows of a message: `files` (images, above the answer),
        the answer's text as ContentRenderer.svelte picks it (with `output` items, the texts
        of StructuredOutputRenderer's message items (structuredOutput.ts
        buildOutputDisplayItems), and `content` is not shown; without, `content`), and the
        code execution entries. `version` older than 0.10 has no `output` rendering."""
        output = message.get("output") if self.new else None
        if output:
            texts = []
            for item in output:
                if not isinstance(item, dict) or item.get("type") in (
                        "function_call_output", "reasoning", "function_call",
                        "open_webui:code_interpreter", "web_search_call", "file_search_call",
                        "computer_call"):
                    continue
                text = "".join(str(p.get("text", "")) for p in item.get("content") or []
                               if isinstance(p, dict) and p.get("text") is not None)
                if text.strip():
                    texts.append(text)
            shown = "\n\n".join(texts)
        else:
            shown = message.get("content", "")
        return {
            "markdown": shown,
            "images_above": [f.get("url") for f in message.get("files") or []
                             if f.get("type") == "image"],
            "code_executions": list(message.get("code_executions") or []),
            "statuses": [s.get("description") for s in message.get("statusHistory") or []],
        }


def output_text(output: list) -> str:
    """structuredOutput.ts getOutputText: the texts of the message items, one per line."""
    texts = []
    for item in output or []:
        if isinstance(item, dict) and item.get("type") == "message":
            text = "".join(str(p.get("text", "")) for p in item.get("content") or []
                           if isinstance(p, dict) and p.get("text") is not None)
            if text.strip():
                texts.append(text)
    return "\n".join(texts)


class Tab:
    """One open chat page (src/lib/components/chat/Chat.svelte): its copy of the chat history,
    chatEventHandler for the events of the chat's messages, chatActionHandler for a click on
    an action button. `inputs`: what the user types into input dialogs, in order (False =
    Cancel)."""

    def __init__(self, webui: OpenWebUI, chat_id: str, inputs=None):
        self.webui = webui
        self.chat_id = chat_id
        self.history = copy.deepcopy(webui.chats[chat_id]["chat"]["history"])
        self.inputs = list(inputs or [])
        self.asked = []

    def message(self, message_id: str) -> dict:
        return self.history["messages"][message_id]

    def watch(self, message_id: str):
        """The message the following events are for (the answer being written)."""
        self._message_id = message_id

    def on_event(self, event: dict):
        """chatEventHandler, for the event types the plugins send."""
        # The emitter is per message; the tests use one message per emitter.
        message = self.history["messages"][self._message_id]
        kind, data = event.get("type"), event.get("data") or {}
        if kind == "status":
            message.setdefault("statusHistory", []).append(data)
        elif kind in ("chat:message:delta", "message"):
            message["content"] = message.get("content", "") + data.get("content", "")
        elif kind in ("chat:message", "replace"):
            message["content"] = data.get("content", "")
        elif kind in ("chat:message:files", "files"):
            message["files"] = data.get("files")
        elif kind in ("chat:message:embeds", "embeds"):
            message["embeds"] = data.get("embeds")
        elif kind in ("source", "citation"):
            if data.get("type") == "code_execution":
                entries = message.setdefault("code_executions", [])
                for i, entry in enumerate(entries):
                    if entry.get("id") == data.get("id"):
                        entries[i] = data
                        break
                else:
                    entries.append(data)
            else:
                message.setdefault("sources", []).append(data)
        elif kind == "chat:completion" and self.webui.new:
            # chatCompletionEventHandler: `output` replaces the message's items and its
            # content becomes their text (before 0.10 the handler knows no `output`).
            if data.get("output") is not None:
                message["output"] = data["output"]
                message["content"] = output_text(data["output"])

    async def event_call(self, event: dict):
        """socket/main.py get_event_call -> the page: an `input` event opens the input dialog
        (title, message, placeholder) and answers with the typed text, or False on Cancel."""
        self.asked.append(copy.deepcopy(event))
        if event.get("type") == "input":
            return self.inputs.pop(0) if self.inputs else False
        if event.get("type") == "confirmation":
            return True
        return None

    async def click_action(self, action, user: dict):
        """chatActionHandler: the body from the page's history (id, role, content, info,
        timestamp of each message up to the answer), the action called as utils/actions.py
        chat_action does, res.messages merged into the history, then the whole history saved."""
        answer_id = self.history["currentId"]
        self._message_id = answer_id
        chain, current = [], answer_id
        while current:
            m = self.history["messages"][current]
            chain.insert(0, m)
            current = m.get("parentId")
        body = {
            "model": "llama3.1:8b",
            "messages": [{k: m[k] for k in ("id", "role", "content", "info", "timestamp")
                          if k in m} for m in chain],
            "model_item": {"id": "llama3.1:8b", "name": "llama3.1:8b"},
            "chat_id": self.chat_id,
            "session_id": "s0ck3t1d",
            "id": answer_id,
        }
        emitter = self.webui.event_emitter(self.chat_id, answer_id, self)
        result = await owui.call_action(action, body, user, emitter, self.event_call,
                                        request=REQUEST)
        if isinstance(result, dict) and result.get("messages"):
            for m in result["messages"]:
                self.history["messages"][m["id"]] = {**self.history["messages"][m["id"]], **m}
        self.webui.save_history(self.chat_id, self.history)
        self.events, self.times = emitter.events, emitter.times
        return result


# The Starlette request Open WebUI passes as __request__; the reduction only needs one.
REQUEST = types.SimpleNamespace(app=types.SimpleNamespace(state=types.SimpleNamespace()))


async def click_without_tab(webui: OpenWebUI, action, chat_id: str, message_id: str,
                            user: dict):
    """The action runs, but no tab is open by the time its events come (the user closed it):
    the server's emitter alone saves what it saves; the page's save never happens."""
    saved = webui.saved_message(chat_id, message_id)
    body = {"model": "llama3.1:8b",
            "messages": [{"id": message_id, "role": "assistant",
                          "content": saved.get("content", "")}],
            "chat_id": chat_id, "session_id": "gone", "id": message_id}
    emitter = webui.event_emitter(chat_id, message_id, None)

    async def no_tab(event):
        return {"error": "Client session disconnected."}

    result = await owui.call_action(action, body, user, emitter, no_tab, request=REQUEST)
    return result, emitter.events
