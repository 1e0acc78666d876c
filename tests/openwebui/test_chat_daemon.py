"""The Run button on Open WebUI 0.10.2 (owui_chat.py) for answers whose handling is the
daemon's: an answer run as a notebook (consecutive Python blocks share one interpreter), plan
texts counting blocks from 1, a re-run offering its files again, and the output of a slow
program shown while it runs (the streamed /run), by the Action and the Tool, on 0.10.2 and
0.6-0.9. These tests need those daemon changes; they are a ctest of their own
(`openwebui.chat_daemon`) so that `openwebui.chat` tests the plugins alone.

  cd tests/openwebui && SANDRUN_BUILD_DIR=/path/to/build python3 -m unittest -v test_chat_daemon
"""

import asyncio
import re
import shutil
import sys
import tempfile
import time
import unittest
import uuid

import owui
import owui_chat
import test_chat
from stack import Stack
from owui_chat import OpenWebUI
from plugin_files import TOOL_FILE
from test_chat import ANSWER, WebUICase, markdown_links

NOTEBOOK = (
    "Step 1: the imports.\n\n```python\nimport numpy as np\nimport matplotlib.pyplot as plt\n```"
    "\n\nStep 2: the data.\n\n```python\nx = np.linspace(0, 10, 50)\ny = np.sin(x)\n"
    "print('points', len(x))\n```\n\nStep 3: the plot.\n\n```python\nplt.plot(x, y)\n"
    "plt.title('sine')\nplt.show()\n```\n"
)


def setUpModule():
    test_chat.STACK = Stack.start()


def tearDownModule():
    if test_chat.STACK is not None:
        test_chat.STACK.stop()


class RunButtonWithDaemonChanges(WebUICase):
    def shown(self, answer: str, clicks: int = 1) -> list:
        chat_id, answer_id = self.chat(answer)
        texts = []
        for _ in range(clicks):
            tab = self.click(chat_id)
            texts.append(self.webui.rendered(tab.message(answer_id))["markdown"])
        return texts

    def test_three_cell_answer_runs_as_a_notebook_with_its_chart(self):
        (text,) = self.shown(NOTEBOOK)
        self.assertIn("**sandrun:** The code ran successfully", text)
        self.assertIn("points 50", text)
        self.assertIn("![figure-1.png](/api/v1/files/", text)
        self.assertIn("Ran block 1 (python), block 2 (python) and block 3 (python).", text)
        self.assertNotIn("NameError", text)
        self.assertNotIn("block 0", text)

    def test_a_failing_middle_cell_stops_the_rest_and_names_its_block(self):
        answer = NOTEBOOK.replace("print('points', len(x))", "print('points', len(z))")
        (text,) = self.shown(answer)
        self.assertIn("**sandrun:** Block 2 (python)", text)
        self.assertIn("block 2, line 3", text)
        self.assertRegex(text, r"did not reach block 3 \(python\)|skipped block 3 \(python")
        self.assertNotIn("block 0", text)
        self.assertNotIn(".sandrun/", text)

    def test_a_rerun_offers_the_same_files_again(self):
        first, second = self.shown(ANSWER, clicks=2)
        for text in (first, second):
            links = markdown_links(text.split("**sandrun:**")[-1])
            self.assertIn("temps.csv", links)
            self.assertIn("figure-1.png", links)

    def test_plan_texts_count_from_1(self):
        (text,) = self.shown("```python\nprint('before')\nraise SystemExit(3)\n```\n\n"
                             "```bash\necho never\n```\n\nOutput:\n\n```\nbefore\n```\n")
        self.assertIn("**sandrun:** Block 1 (python) failed with exit code 3.", text)
        self.assertRegex(text, r"block 2 \(bash[^)]*block 1")
        self.assertIsNone(re.search(r"block 0\b", text), text)


# A slow program: a line, 2 s of nothing, ten lines 0.15 s apart, a last line.
SLOW_PYTHON = ("import time\nprint('first line', flush=True)\ntime.sleep(2)\n"
               "for i in range(10):\n    print('tick', i, flush=True)\n    time.sleep(0.15)\n"
               "print('last line')\n")
SLOW_BASH = ("echo first line\nsleep 2\n"
             "for i in 0 1 2 3 4 5 6 7 8 9; do echo tick $i; sleep 0.15; done\necho last line\n")


def _seconds_said(text: str) -> str:
    """The text without the run times it names ("in 3.6 s"), which differ run to run."""
    return re.sub(r"\b\d+(\.\d)? s\b", "N s", text)


class ActionShowsOutputWhileItRuns(WebUICase):
    """Open WebUI 0.10.2: the block's code execution entry shows the output so far while the
    program runs; what the chat keeps afterwards is what a plain (unstreamed) run gives."""

    def run_slow(self, stream: bool = True):
        chat_id, answer_id = self.chat(f"Here:\n\n```python\n{SLOW_PYTHON}```\n")
        if not stream:  # the plugin as before: no `progress`, so a plain POST /run
            plugin = sys.modules[type(self.action).__module__]
            streamed = plugin.call_sandrun
            plugin.call_sandrun = lambda *args: streamed(*args[:4])
        tab = self.click(chat_id)
        return chat_id, answer_id, tab

    def test_a_slow_programs_output_is_shown_while_it_runs(self):
        chat_id, answer_id, tab = self.run_slow()
        updates = owui.entry_updates(tab.events, tab.times, f"sandrun-{answer_id}-0")
        live = owui.check_live_updates(self, updates, "first line", "last line")
        self.assertEqual(live[0][1]["name"], "Block 1 (python) · running…")
        said = [t for e, t in zip(tab.events, tab.times) if e["type"] == "message"]
        self.assertGreater(min(said), live[-1][0], "no message event while it runs")
        # What stays is what the plain run gives.
        text = self.webui.rendered(self.webui.saved_message(chat_id, answer_id))["markdown"]
        plain_chat, plain_answer, _ = self.run_slow(stream=False)
        plain = self.webui.rendered(self.webui.saved_message(plain_chat, plain_answer))
        self.assertEqual(_seconds_said(text), _seconds_said(plain["markdown"]))
        self.assertIn("first line\ntick 0", text)
        entries = self.webui.saved_message(chat_id, answer_id)["code_executions"]
        self.assertEqual([e["name"] for e in entries], ["Block 1 (python)"])


class ActionShowsOutputWhileItRunsOn09(ActionShowsOutputWhileItRuns):
    VERSION = "0.9"

    def test_a_slow_programs_output_is_shown_while_it_runs(self):
        chat_id, answer_id, tab = self.run_slow()
        updates = owui.entry_updates(tab.events, tab.times, f"sandrun-{answer_id}-0")
        owui.check_live_updates(self, updates, "first line", "last line")
        saved = self.webui.saved_message(chat_id, answer_id)
        self.assertNotIn("output", saved)
        self.assertIn("first line\ntick 0", self.webui.rendered(saved)["markdown"])
        self.assertEqual([e["name"] for e in tab.message(answer_id)["code_executions"]],
                         ["Block 1 (python)"])


class ToolShowsOutputWhileItRuns(unittest.TestCase):
    """The Tool during an answer: its call's code execution entry shows the output so far,
    for a kernel's cell (run_python, 0.10.2) and for a program (run_bash, 0.6-0.9)."""

    def call(self, version: str, name: str, **args):
        store = tempfile.mkdtemp(prefix="owui-files.")
        self.addCleanup(shutil.rmtree, store, True)
        webui = OpenWebUI(version, store)
        user = owui.user()
        tools, _, _ = owui.load_plugin(TOOL_FILE, "Tools")
        owui.set_valves(tools, service_url=test_chat.STACK.base_url,
                        token=test_chat.STACK.token, wall_time_s=60)
        chat_id, answer_id = webui.new_chat(user, "Let me run it.", structured=webui.new)
        tab = webui.open_tab(chat_id)
        tab.watch(answer_id)
        emitter = webui.event_emitter(chat_id, answer_id, tab)
        with webui.installed():
            text = owui.run(owui.call_tool(tools, name, args, user, chat_id, emitter,
                                           message_id=answer_id, request=owui_chat.REQUEST))
        updates = owui.entry_updates(emitter.events, emitter.times)
        live = owui.check_live_updates(self, updates, "first line", "last line")
        self.assertIn("last line", text)
        self.assertEqual(tab.message(answer_id)["code_executions"], [updates[-1][1]])
        return live

    def test_a_kernel_cells_output_on_open_webui_010(self):
        live = self.call("0.10.2", "run_python", code=SLOW_PYTHON)
        self.assertEqual(live[0][1]["name"], "Python · running…")

    def test_a_programs_output_on_open_webui_09(self):
        live = self.call("0.9", "run_bash", command=SLOW_BASH)
        self.assertEqual(live[0][1]["name"], "Bash · running…")


class GivingUpEndsTheRun(unittest.TestCase):
    """A call that Open WebUI gives up on (its task cancelled: the user pressed stop) closes
    the stream, and the server ends the run: the chat's next call is not refused as "still
    going", long before the first run would have ended by itself (its 60 s limit)."""

    def test_a_cancelled_call_ends_its_run(self):
        tools, _, _ = owui.load_plugin(TOOL_FILE, "Tools")
        owui.set_valves(tools, service_url=test_chat.STACK.base_url,
                        token=test_chat.STACK.token, wall_time_s=60, stateful=False)
        user, chat_id = owui.user(), "chat-" + uuid.uuid4().hex[:8]
        endless = "for i in $(seq 300); do echo line $i; sleep 0.2; done"

        async def start_and_give_up():
            shown = asyncio.Event()

            async def emitter(event):
                if "running" in (event.get("data") or {}).get("name", ""):
                    shown.set()
            task = asyncio.create_task(owui.call_tool(tools, "run_bash", {"command": endless},
                                                      user, chat_id, emitter))
            await asyncio.wait_for(shown.wait(), 30)  # it runs: its output is shown
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task

        owui.run(start_and_give_up())
        given_up = time.monotonic()
        while True:
            text = owui.run(owui.call_tool(tools, "run_bash", {"command": "echo next"}, user,
                                           chat_id, owui.Recorder()))
            if "still going" not in text or time.monotonic() - given_up > 30:
                break
        self.assertIn("next", text)
        self.assertLess(time.monotonic() - given_up, 30)


if __name__ == "__main__":
    unittest.main()
