"""The Open WebUI plugins (openwebui/sandrun_action.py, openwebui/sandrun_tool.py), loaded and
called as Open WebUI does (owui.py), against the real stack: nginx + sandrund started by
scripts/serve (stack.py). A few answers the real service cannot be made to give on demand
(busy, a session still running, a redirect, a wrong server) come from a small fake server.

Run by ctest as `openwebui.plugins`; by hand (as root, after a build):
  cd tests/openwebui && SANDRUN_BUILD_DIR=/path/to/build python3 -m unittest -v test_plugins
"""

import asyncio
import http.client
import http.server
import io
import json
import os
import re
import sys
import threading
import time
import unittest
import uuid

import owui
from stack import Stack, free_loopback_port

from plugin_files import ACTION_FILE, TOOL_FILE, fetch, markdown_links

STACK = None


def setUpModule():
    global STACK
    STACK = Stack.start()


def tearDownModule():
    if STACK is not None:
        STACK.stop()


class PluginFiles(unittest.TestCase):
    """What Open WebUI needs of the files themselves."""

    def test_front_matter_names_the_plugin(self):
        for path, cls in ((ACTION_FILE, "Action"), (TOOL_FILE, "Tools")):
            with self.subTest(path=path):
                _, _, front = owui.load_plugin(path, cls)
                for key in ("title", "author", "version", "description", "licence",
                            "required_open_webui_version"):
                    self.assertTrue(front.get(key), f"front matter has no {key}")

    def test_open_webui_import_rewrites_change_nothing(self):
        for path in (ACTION_FILE, TOOL_FILE):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            self.assertEqual(owui.replace_imports(text), text, path)

    def test_only_standard_library_and_pydantic(self):
        allowed = {"asyncio", "base64", "hashlib", "html", "importlib", "inspect", "json", "re",
                   "signal", "socket", "threading", "http", "urllib", "uuid", "typing",
                   "pydantic"}
        for path in (ACTION_FILE, TOOL_FILE):
            with open(path, encoding="utf-8") as f:
                imports = re.findall(r"^(?:import|from)\s+([\w]+)", f.read(), re.M)
            self.assertLessEqual(set(imports), allowed, path)

    def test_shared_client_code_is_identical(self):
        sections = []
        for path in (ACTION_FILE, TOOL_FILE):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            m = re.search(r"^# --- sandrun client: begin.*?^# --- sandrun client: end", text,
                          re.M | re.S)
            self.assertIsNotNone(m, path)
            sections.append(m.group(0))
        self.assertEqual(sections[0], sections[1])

    def test_displays_render_in_order_and_inert(self):
        _, module, _ = owui.load_plugin(ACTION_FILE, "Action")
        image = {"name": "figure-1.png", "url": "http://h/files/u/r/figure-1.png?md5=x",
                 "mime": "image/png"}
        result = {"displays": [
            {"kind": "image", "mime": "image/png", "file": image},
            {"kind": "table", "mime": "text/markdown",
             "text": "| a |\n|---|\n| ![x](http://elsewhere/t.png) <img src=y> |"},
            {"kind": "text", "mime": "text/plain", "text": "plain"},
        ]}
        parts = module.displays_markdown(result)
        self.assertEqual(parts[0], f"![figure-1.png]({image['url']})")
        # A table's text is the program's: it may not load an image or carry HTML.
        self.assertEqual(parts[1], "| a |\n|---|\n| !\\[x\\](http://elsewhere/t.png) "
                                   "&lt;img src=y&gt; |")
        self.assertEqual(parts[2], "```text\nplain\n```")
        self.assertEqual(module.displayed_urls(result), {image["url"]})

    def test_valves_have_defaults_and_descriptions(self):
        for path, cls in ((ACTION_FILE, "Action"), (TOOL_FILE, "Tools")):
            instance, _, _ = owui.load_plugin(path, cls)
            schema = instance.Valves.schema()
            for name in ("service_url", "token", "wall_time_s", "memory_mb", "network",
                         "packages"):
                self.assertIn(name, schema["properties"], f"{path}: valve {name}")
                self.assertTrue(schema["properties"][name].get("description"), name)
        action, _, _ = owui.load_plugin(ACTION_FILE, "Action")
        self.assertIn("show_plan", action.Valves.schema()["properties"])

    def test_tools_offered_to_the_model(self):
        tools, _, _ = owui.load_plugin(TOOL_FILE, "Tools")
        functions = owui.tool_functions(tools)
        self.assertEqual(set(functions), {"run_python", "run_bash", "list_files"})
        for name, function in functions.items():
            spec = owui.tool_spec(function)
            self.assertGreater(len(spec["description"]), 40, name)
            for param, info in spec["parameters"].items():
                self.assertIs(info["type"], str, f"{name}({param}) needs a str type hint")
                self.assertTrue(info["description"], f"{name}: no :param {param}:")
        self.assertEqual(owui.tool_spec(functions["run_python"])["required"], ["code"])
        self.assertEqual(owui.tool_spec(functions["run_bash"])["required"], ["command"])
        self.assertEqual(owui.tool_spec(functions["list_files"])["parameters"], {})


class ActionAgainstService(unittest.TestCase):
    """The Run button: the answer goes to POST /run as `markdown`."""

    def setUp(self):
        self.action, _, _ = owui.load_plugin(ACTION_FILE, "Action")
        owui.set_valves(self.action, service_url=STACK.base_url, token=STACK.token,
                        wall_time_s=30)
        self.chat_id = str(uuid.uuid4())
        self.user = owui.user()

    def click(self, markdown: str) -> owui.Recorder:
        recorder = owui.Recorder()
        body = owui.action_body(markdown, self.chat_id)
        result = owui.run(owui.call_action(self.action, body, self.user, recorder))
        self.assertIsNone(result)
        self.body = body
        return recorder

    def assert_status_sequence(self, rec: owui.Recorder):
        statuses = rec.statuses()
        self.assertGreaterEqual(len(statuses), 2, rec.events)
        self.assertFalse(statuses[0]["done"])
        self.assertTrue(statuses[-1]["done"], "the last status must stop the shimmer")
        return statuses[-1]["description"]

    def test_ok_run(self):
        rec = self.click("Here you go:\n\n```python\nprint(6 * 7)\n```\n\nIt prints 42.\n")
        final = self.assert_status_sequence(rec)
        self.assertRegex(final, r"^The code ran successfully in (under )?[0-9.]+ s\.$")
        # The first code_execution event shows the run going on (no result), a later one with
        # the same id carries the block's result.
        first = rec.code_executions()[0]
        self.assertNotIn("result", first)
        shown = rec.final_code_executions()
        self.assertEqual(len(shown), 1, shown)
        block = shown[first["id"]]
        self.assertEqual(block["language"], "python")
        self.assertEqual(block["name"], "Block 1 (python)")
        self.assertEqual(block["result"]["output"].strip(), "42")
        self.assertEqual(block["result"]["error"], "")
        text = rec.appended()
        self.assertTrue(text.startswith("\n\n---\n**sandrun:** The code ran successfully"), text)
        # The output in a fenced block (the service may put a header line per block first).
        self.assertRegex(text, r"\n```text\n(.*\n)*42\n```\n")
        self.assertIn("Ran block 1 (python).", text)

    def test_pip_then_python(self):
        rec = self.click(
            "Install requests first:\n\n```bash\npip install requests\n```\n\n"
            "Then use it:\n\n```python\nimport requests\nprint('requests', requests.__version__)\n"
            "```\n\nExample output:\n\n```\nrequests 2.28.1\n```\n"
        )
        final = self.assert_status_sequence(rec)
        self.assertTrue(final.startswith("The code ran successfully"), final)
        shown = list(rec.final_code_executions().values())
        self.assertEqual([b["language"] for b in shown], ["bash", "python"])
        self.assertIn("already satisfied", shown[0]["result"]["output"].lower())
        self.assertRegex(shown[1]["result"]["output"], r"requests \d+\.\d+")
        text = rec.appended()
        self.assertIn("Ran block 1 (bash) and block 2 (python); skipped block 3", text)
        # Output headers count blocks as the summary does.
        self.assertIn("--- block 1 (bash, install) ---", text)
        self.assertIn("--- block 2 (python, main) ---", text)
        self.assertNotIn("--- block 0", text)
        # While the install runs, the status says so.
        self.assertEqual(rec.statuses()[0]["description"], "Installing packages…")

    def test_plot_and_csv(self):
        rec = self.click(
            "```python\nimport matplotlib.pyplot as plt\nimport pandas as pd\n"
            "df = pd.DataFrame({'x': [1, 2, 3], 'y': [1, 4, 9]})\n"
            "df.to_csv('squares.csv', index=False)\n"
            "df.plot(x='x', y='y')\nplt.savefig('plot.png')\n"
            "print(df['y'].sum())\n```\n"
        )
        final = self.assert_status_sequence(rec)
        self.assertTrue(final.startswith("The code ran successfully"), final)
        text = rec.appended()
        links = markdown_links(text)
        self.assertEqual(links["plot.png"][0], True, "a raster image is shown inline")
        self.assertEqual(links["squares.csv"][0], False, "other files are links")
        self.assertRegex(text, r"\n```text\n(.*\n)*14\n```\n")
        status, ctype, data = fetch(links["plot.png"][1])
        self.assertEqual((status, ctype), (200, "image/png"))
        self.assertTrue(data.startswith(b"\x89PNG\r\n\x1a\n"))
        status, _, data = fetch(links["squares.csv"][1])
        self.assertEqual(data.decode().splitlines(), ["x,y", "1,1", "2,4", "3,9"])
        files = list(rec.final_code_executions().values())[-1]["result"]["files"]
        self.assertEqual(sorted(f["name"] for f in files), ["plot.png", "squares.csv"])
        if os.environ.get("SANDRUN_SHOW_APPENDED"):
            print("\n----- appended by the Action -----" + text + "-----")

    def test_shown_chart_and_trailing_dataframe_in_order(self):
        rec = self.click(
            "Here is the plot and the table:\n\n"
            "```python\nimport matplotlib.pyplot as plt\nimport pandas as pd\n"
            "df = pd.DataFrame({'city': ['Paris', 'Oslo'], 'temp': [12.5, 3.25]})\n"
            "df.plot.bar(x='city', y='temp', title='Temperatures')\n"
            "plt.show()\n"
            "df\n```\n"
        )
        final = self.assert_status_sequence(rec)
        self.assertTrue(final.startswith("The code ran successfully"), final)
        text = rec.appended()
        links = markdown_links(text)
        self.assertEqual(links["figure-1.png"][0], True, "the shown chart is inline")
        status, ctype, data = fetch(links["figure-1.png"][1])
        self.assertEqual((status, ctype), (200, "image/png"))
        self.assertTrue(data.startswith(b"\x89PNG\r\n\x1a\n"))
        # The chart, then the table (as Markdown), each once: the table's text form, which
        # the program printed as a notebook does, is not shown as well.
        chart = text.index("![figure-1.png]")
        table = text.index("|  | city | temp |\n|---|---|---|\n| 0 | Paris | 12.5 |")
        self.assertLess(chart, table)
        self.assertEqual(text.count("figure-1.png]"), 1, text)
        self.assertNotIn("0  Paris  12.50", text)
        self.assertNotIn("```text", text)
        self.assertNotIn("(no output)", text)
        if os.environ.get("SANDRUN_SHOW_APPENDED"):
            print("\n----- appended by the Action -----" + text + "-----")

    def test_failing_block_is_named_and_later_blocks_not_reached(self):
        rec = self.click("```python\nprint('before')\nraise SystemExit(3)\n```\n\n"
                         "```bash\necho never\n```\n")
        final = self.assert_status_sequence(rec)
        self.assertEqual(final, "Block 1 (python) failed with exit code 3.")
        block = list(rec.final_code_executions().values())[0]
        self.assertIn("Exit code 3.", block["result"]["error"])
        # Block 2 is named as not run, whether the plan marks it as planned or not.
        self.assertRegex(rec.appended(),
                         r"did not reach block 2 \(bash\) after the failure|skipped block 2 \(bash")
        self.assertNotIn("never", rec.appended())

    def test_timeout(self):
        owui.set_valves(self.action, service_url=STACK.base_url, token=STACK.token,
                        wall_time_s=2)
        started = time.monotonic()
        rec = self.click("```python\nimport time\nprint('start', flush=True)\n"
                         "time.sleep(30)\n```\n")
        self.assertLess(time.monotonic() - started, 20)
        final = self.assert_status_sequence(rec)
        self.assertEqual(final, "Stopped: the run reached its time limit (2 s of wall-clock time, "
                                "2 s of CPU time).")
        self.assertIn(final, rec.appended())
        self.assertIn("start", rec.appended())

    def test_plan_is_shown_when_asked(self):
        owui.set_valves(self.action, service_url=STACK.base_url, token=STACK.token,
                        show_plan=True)
        rec = self.click("```python\nprint(1)\n```\n\n```json\n{\"a\": 1}\n```\n")
        text = rec.appended()
        self.assertIn("| block | language | runs | why |", text)
        self.assertRegex(text, r"\| 1 \| python \| yes \|")
        self.assertRegex(text, r"\| 2 \| json \| no \|")

    def test_no_code_in_the_answer(self):
        rec = self.click("There is nothing to run in this answer.")
        final = self.assert_status_sequence(rec)
        self.assertTrue(final.startswith("There is no code to run here:"), final)
        self.assertIn(final, rec.appended())

    def test_wrong_token(self):
        owui.set_valves(self.action, service_url=STACK.base_url, token="not-the-token")
        rec = self.click("```python\nprint(1)\n```\n")
        final = self.assert_status_sequence(rec)
        self.assertEqual(final, "sandrun refused the bearer token: put a valid token in the "
                                "plugin's 'token' valve.")
        self.assertIn(final, rec.appended())
        running_then_failed = rec.final_code_executions()
        self.assertEqual(len(running_then_failed), 1)
        self.assertEqual(list(running_then_failed.values())[0]["result"]["error"], final)

    def test_network_refused_by_the_server(self):
        owui.set_valves(self.action, service_url=STACK.base_url, token=STACK.token, network=True)
        final = self.assert_status_sequence(self.click("```bash\ncurl -sI example.org\n```\n"))
        self.assertEqual(final, "This sandrun server does not allow network access: turn the "
                                "plugin's 'network' valve off.")

    def test_packages_valve_is_sent_and_its_refusals_explained(self):
        # The suite's server has the network off and nothing prebuilt: a valid set is refused
        # (403 network_forbidden, field packages), a bad entry is named (400 invalid_package).
        owui.set_valves(self.action, service_url=STACK.base_url, token=STACK.token,
                        packages="--index-url=http://x/simple")
        final = self.assert_status_sequence(self.click("```python\nprint(1)\n```\n"))
        self.assertTrue(final.startswith("sandrun refused an entry of the plugin's 'packages' "
                                         "valve: package '--index-url=http://x/simple' is a "
                                         "pip option"), final)
        owui.set_valves(self.action, service_url=STACK.base_url, token=STACK.token,
                        packages=" numpy , sandrun-not-prebuilt ,")
        rec = self.click("```python\nprint(1)\n```\n")
        final = self.assert_status_sequence(rec)
        self.assertTrue(final.startswith("This sandrun server cannot prepare the packages of the "
                                         "plugin's 'packages' valve:"), final)
        self.assertIn("numpy, sandrun-not-prebuilt", final)
        self.assertIn("environments_prebuild", final)
        self.assertEqual(rec.statuses()[0]["description"], "Installing packages…")

    def test_limit_above_the_ceiling(self):
        owui.set_valves(self.action, service_url=STACK.base_url, token=STACK.token,
                        wall_time_s=100000)
        final = self.assert_status_sequence(self.click("```python\nprint(1)\n```\n"))
        self.assertTrue(final.startswith("The limits in this plugin's valves are outside what "
                                         "the server allows:"), final)
        self.assertTrue(final.endswith("Change them in the valves."), final)

    def test_unreachable_service(self):
        port = free_loopback_port()
        owui.set_valves(self.action, service_url=f"http://127.0.0.1:{port}/", token=STACK.token)
        rec = self.click("```python\nprint(1)\n```\n")
        final = self.assert_status_sequence(rec)
        self.assertEqual(final, f"Could not reach sandrun at http://127.0.0.1:{port}: the "
                                "connection was refused (nothing listens there). Check the "
                                "'service_url' valve and that Open WebUI can reach that address.")
        self.assertIn(final, rec.appended())

    def test_empty_answer(self):
        rec = self.click("")
        self.assertEqual(rec.statuses()[-1]["description"], "Nothing to run: the answer is empty.")
        self.assertEqual(rec.appended(), "")


class ToolAgainstService(unittest.TestCase):
    """The model's tools: run_python, run_bash, list_files; session = the chat."""

    def setUp(self):
        self.tools, _, _ = owui.load_plugin(TOOL_FILE, "Tools")
        owui.set_valves(self.tools, service_url=STACK.base_url, token=STACK.token, wall_time_s=30)
        self.chat_id = str(uuid.uuid4())
        self.user = owui.user()

    def call(self, name: str, chat_id: str = None, **args) -> tuple:
        rec = owui.Recorder()
        text = owui.run(owui.call_tool(self.tools, name, args, self.user,
                                       chat_id or self.chat_id, rec))
        self.assertIsInstance(text, str)
        return text, rec

    def test_packages_valve(self):
        owui.set_valves(self.tools, service_url=STACK.base_url, token=STACK.token,
                        packages="numpy,sandrun-not-prebuilt")
        text, rec = self.call("run_python", code="print(1)")
        self.assertIn("cannot prepare the packages of the plugin's 'packages' valve", text)
        self.assertEqual(rec.statuses()[0]["description"], "Installing packages…")

    def test_run_python_ok(self):
        text, rec = self.call("run_python", code="print(6 * 7)")
        # Stateful by default: the chat's kernel ran it as its first cell.
        self.assertTrue(text.startswith("status: ok (kernel started, cell 1, "), text)
        self.assertIn("stdout:\n```text\n42\n```", text)
        self.assertIn("stderr: (empty)", text)
        statuses = rec.statuses()
        self.assertFalse(statuses[0]["done"])
        self.assertTrue(statuses[-1]["done"])
        execution = list(rec.final_code_executions().values())
        self.assertEqual(len(execution), 1)
        self.assertEqual(execution[0]["code"], "print(6 * 7)")
        self.assertEqual(execution[0]["result"]["output"].strip(), "42")

    def test_calls_in_one_chat_share_files(self):
        text, _ = self.call("run_python", code="open('notes.txt', 'w').write('kept\\n')")
        self.assertTrue(text.startswith("status: ok"), text)
        text, _ = self.call("run_bash", command="cat notes.txt")
        self.assertTrue(text.startswith("status: ok"), text)
        self.assertIn("kept", text)
        listing, _ = self.call("list_files")
        self.assertRegex(listing, r"\b5\tnotes\.txt\b")
        other, _ = self.call("run_bash", chat_id=str(uuid.uuid4()), command="cat notes.txt")
        # Bash in a stateful chat is a %%bash cell of its kernel; bash's exit code is kept.
        self.assertTrue(other.startswith("status: error (kernel started, cell 1"), other)
        self.assertIn("The code failed with exit code 1.", other)
        self.assertNotIn("CalledProcessError", other)

    def test_session_valve_reaches_the_code_interpreters_files(self):
        """With the Code Interpreter's bound token and session "jupyter", the Tool sees the
        files a cell of Open WebUI's Code Interpreter (sandrun's Jupyter API) wrote."""
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "jupyter"))
        from owui_jupyter import execute_code_jupyter
        bound = STACK.token + "-bound"
        out = owui.run(execute_code_jupyter(
            STACK.base_url, "_ = open('from_ci.csv', 'w').write('a,b\\n1,2\\n')", token=bound))
        self.assertTrue(out.result.startswith("from_ci.csv: http"), (out.result, out.stderr))
        owui.set_valves(self.tools, service_url=STACK.base_url, token=bound, wall_time_s=30,
                        session="jupyter")
        text, _ = self.call("run_python", code="print(open('from_ci.csv').read())")
        self.assertTrue(text.startswith("status: ok"), text)
        self.assertIn("a,b\n1,2", text)

    def test_variables_carry_over_between_calls_of_a_chat(self):
        text, _ = self.call("run_python", code="import statistics\ndata = [3, 1, 2]")
        self.assertTrue(text.startswith("status: ok"), text)
        text, _ = self.call("run_python", code="statistics.median(data)")
        self.assertTrue(text.startswith("status: ok (kernel kept, cell 2, "), text)
        self.assertIn("stdout:\n```text\n2\n```", text)
        # Another chat has a kernel of its own.
        other, _ = self.call("run_python", chat_id=str(uuid.uuid4()), code="print(data)")
        self.assertTrue(other.startswith("status: error"), other)
        self.assertIn("NameError", other)

    def test_stateful_valve_off_runs_fresh_programs(self):
        owui.set_valves(self.tools, service_url=STACK.base_url, token=STACK.token, wall_time_s=30,
                        stateful=False)
        text, _ = self.call("run_python", code="data = 1")
        self.assertTrue(text.startswith("status: ok (exit code 0, "), text)
        text, _ = self.call("run_python", code="print(data)")
        self.assertTrue(text.startswith("status: error (exit code 1"), text)

    def test_pip_then_python(self):
        text, _ = self.call("run_bash", command="pip install requests")
        self.assertTrue(text.startswith("status: ok"), text)
        self.assertIn("already satisfied", text.lower())
        text, _ = self.call("run_python", code="import requests\nprint(requests.__version__)")
        self.assertTrue(text.startswith("status: ok"), text)

    def test_plot_and_csv_as_markdown(self):
        text, rec = self.call(
            "run_python",
            code="import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.savefig('chart.png')\n"
                 "open('table.csv', 'w').write('a,b\\n1,2\\n')\n",
        )
        self.assertTrue(text.startswith("status: ok"), text)
        links = markdown_links(text)
        self.assertEqual(links["chart.png"][0], True)
        self.assertEqual(links["table.csv"][0], False)
        self.assertIn(f"[table.csv]({STACK.base_url}/files/", text)
        self.assertEqual(fetch(links["table.csv"][1])[2], b"a,b\n1,2\n")
        files = list(rec.final_code_executions().values())[0]["result"]["files"]
        # The saved files, and the figures the run showed (a kernel shows the figure still
        # open at the end, as figure-N.png in `displays`).
        names = {f["name"] for f in files}
        self.assertLessEqual({"chart.png", "table.csv"}, names)
        self.assertLessEqual(names - {"chart.png", "table.csv"},
                             {n for n, (image, _) in links.items() if image})

    def test_shown_chart_and_table_come_back_in_order(self):
        # A fresh program's displays (the notebook loader); a kernel's are in integration.Kernels.
        owui.set_valves(self.tools, service_url=STACK.base_url, token=STACK.token, wall_time_s=30,
                        stateful=False)
        text, rec = self.call(
            "run_python",
            code="import matplotlib.pyplot as plt\nimport pandas as pd\n"
                 "plt.plot([1, 4, 9])\nplt.show()\n"
                 "pd.DataFrame({'n': [1, 2]})\n",
        )
        self.assertTrue(text.startswith("status: ok"), text)
        self.assertIn("shown by the program, in order", text)
        links = markdown_links(text)
        self.assertEqual(links["figure-1.png"][0], True)
        self.assertEqual(fetch(links["figure-1.png"][1])[1], "image/png")
        self.assertLess(text.index("![figure-1.png]"), text.index("|  | n |\n|---|---|"))
        self.assertEqual(text.count("figure-1.png]"), 1, text)
        files = list(rec.final_code_executions().values())[0]["result"]["files"]
        self.assertEqual([f["name"] for f in files], ["figure-1.png"])

    def test_error_gives_stderr(self):
        text, _ = self.call("run_python", code="1 / 0")
        self.assertTrue(text.startswith("status: error (kernel started, cell 1"), text)
        self.assertIn("The code raised an error (the traceback is in stderr).", text)
        self.assertIn("ZeroDivisionError", text)

    def test_a_cell_that_ends_its_kernel_says_the_variables_are_gone(self):
        text, _ = self.call("run_python", code="x = 1")
        self.assertTrue(text.startswith("status: ok (kernel started, cell 1"), text)
        text, _ = self.call("run_python", code="import os\nos._exit(3)")
        self.assertTrue(text.startswith("status: killed (kernel ended by this cell, "), text)
        self.assertIn("The program was killed.", text)
        self.assertNotIn("signal None", text)
        self.assertIn("The kernel was ended: the variables of earlier calls are gone", text)
        text, _ = self.call("run_python", code="print('x' in globals())")
        self.assertTrue(text.startswith("status: ok (kernel restarted, cell 1"), text)
        self.assertIn("stdout:\n```text\nFalse\n```", text)

    def test_a_fork_bomb_is_not_called_a_failure_with_exit_code_0(self):
        owui.set_valves(self.tools, service_url=STACK.base_url, token=STACK.token,
                        stateful=False)
        # Forks until the kernel refuses, ends its children and exits 0. (A bash fork bomb
        # raced bash's own fork retries: under load its last fork gave up, exit 254.)
        code = ("import os, time\npids = []\ntry:\n    while True:\n        pid = os.fork()\n"
                "        if pid == 0:\n            time.sleep(60)\n            os._exit(0)\n"
                "        pids.append(pid)\nexcept OSError:\n    pass\nfor pid in pids:\n"
                "    os.kill(pid, 9)\n    os.waitpid(pid, 0)\nprint('done')\n")
        text, _ = self.call("run_python", code=code)
        self.assertTrue(text.startswith("status: error (exit code 0"), text)
        self.assertIn("reached its process limit", text)
        self.assertIn("The run failed although the program exited 0 (stderr says why).", text)
        self.assertNotIn("failed with exit code 0", text)

    def test_long_output_is_cut_in_the_middle(self):
        owui.set_valves(self.tools, service_url=STACK.base_url, token=STACK.token,
                        max_output_chars=1000)
        text, _ = self.call("run_python", code="print('A' * 5000 + 'END')")
        self.assertIn("characters cut ...]", text)
        self.assertIn("END", text)
        self.assertLess(len(text), 2000)

    def test_timeout(self):
        owui.set_valves(self.tools, service_url=STACK.base_url, token=STACK.token, wall_time_s=2)
        text, rec = self.call("run_bash", command="echo started; sleep 30")
        self.assertTrue(text.startswith("status: timeout"), text)
        self.assertIn("Stopped: the run reached its time limit (2 s of wall-clock time", text)
        self.assertIn("started", text)
        self.assertTrue(rec.statuses()[-1]["description"].startswith("Stopped: the run reached"))

    def test_event_loop_keeps_running_during_a_run(self):
        # Both plugins wait for sandrun through the same client code (a test above checks it
        # is the same text), so one of them shows it for both.
        async def scenario():
            ticks = 0
            stop = asyncio.Event()

            async def ticker():
                nonlocal ticks
                while not stop.is_set():
                    await asyncio.sleep(0.05)
                    ticks += 1

            task = asyncio.create_task(ticker())
            text = await owui.call_tool(self.tools, "run_python",
                                        {"code": "import time\ntime.sleep(1.5)"}, self.user,
                                        self.chat_id, owui.Recorder())
            stop.set()
            await task
            return ticks, text

        ticks, text = owui.run(scenario())
        self.assertTrue(text.startswith("status: ok"), text)
        # 1.5 s of sleep in the sandbox at 20 ticks a second: a blocked loop would tick once.
        self.assertGreater(ticks, 15)

    def test_unreachable_service(self):
        port = free_loopback_port()
        owui.set_valves(self.tools, service_url=f"http://127.0.0.1:{port}", token=STACK.token)
        text, rec = self.call("run_python", code="print(1)")
        self.assertEqual(text, f"sandrun could not run the code: Could not reach sandrun at "
                               f"http://127.0.0.1:{port}: the connection was refused (nothing "
                               "listens there). Check the 'service_url' valve and that Open "
                               "WebUI can reach that address.")
        self.assertTrue(rec.statuses()[-1]["done"])


class FakeSandrun:
    """A stand-in server answering POST /run with one canned reply."""

    def __init__(self, status: int, body, headers: dict = None):
        reply = body if isinstance(body, bytes) else json.dumps(body).encode()
        requests = self.requests = []  # (path, headers, JSON body) of each request

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                requests.append((self.path, dict(self.headers), json.loads(data)))
                self.send_response(status)
                for k, v in (headers or {"Content-Type": "application/json"}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def error(code: str, message: str) -> dict:
    return {"error": {"code": code, "message": message}}


def canned_markdown_result(base: str) -> dict:
    """A 200 answer to a `markdown` request in DESIGN.md §2's shape: a pip block, a Python block
    that made a plot and a CSV, and an example-output block that did not run."""
    link = base + "/files/u1/r1/{}?md5=abc&expires=1900000000"
    limits = {"wall_time_s": 30, "cpu_time_s": 30, "memory_mb": 512, "processes": 64,
              "output_bytes": 1048576, "max_files": 100, "file_size_mb": 10, "disk_mb": 100}
    return {
        "id": "r1", "status": "ok", "exit_code": 0, "signal": None,
        "stdout": "Requirement already satisfied: pandas\nrows: 3\n", "stderr": "",
        "stdout_truncated": False, "stderr_truncated": False,
        "snippets": [
            {"index": 0, "language": "bash", "status": "ok", "exit_code": 0, "signal": None,
             "stdout": "Requirement already satisfied: pandas\n", "stderr": "", "wall_ms": 900},
            {"index": 1, "language": "python", "status": "ok", "exit_code": 0, "signal": None,
             "stdout": "rows: 3\n", "stderr": "", "wall_ms": 1400},
        ],
        "plan": [
            {"index": 0, "language": "bash", "run": True, "reason": "install step"},
            {"index": 1, "language": "python", "run": True, "reason": "main code"},
            {"index": 2, "language": "text", "run": False, "reason": "example output"},
        ],
        "files": [
            {"name": "plot.png", "path": "plot.png", "size": 20480, "mime": "image/png",
             "sha256": "0" * 64, "url": link.format("plot.png"), "expires_at": 1900000000},
            {"name": "data.csv", "path": "data.csv", "size": 57, "mime": "text/csv",
             "sha256": "1" * 64, "url": link.format("data.csv"), "expires_at": 1900000000},
        ],
        "files_skipped": [{"path": ".local", "reason": "ignored"}],
        "usage": {"wall_ms": 2345, "cpu_ms": 2000, "max_rss_kb": 80000},
        "limits": limits,
    }


class ActionRendering(unittest.TestCase):
    """What the Action makes of a full `markdown` answer, independent of the daemon's block
    selection (the tests against the service cover that)."""

    def test_appended_message_and_code_executions(self):
        fake = FakeSandrun(200, canned_markdown_result("http://sandrun.test"))
        try:
            action, _, _ = owui.load_plugin(ACTION_FILE, "Action")
            owui.set_valves(action, service_url=fake.url)
            rec = owui.Recorder()
            body = owui.action_body("(the answer)", "chat-1")
            owui.run(owui.call_action(action, body, owui.user(), rec))
        finally:
            fake.close()
        link = "http://sandrun.test/files/u1/r1/{}?md5=abc&expires=1900000000"
        self.assertEqual(rec.appended(), (
            "\n\n---\n**sandrun:** The code ran successfully in 2.3 s.\n\n"
            "```text\nRequirement already satisfied: pandas\nrows: 3\n```\n\n"
            f"![plot.png]({link.format('plot.png')})\n\n"
            f"- [data.csv]({link.format('data.csv')}) (57 bytes)\n\n"
            "Ran block 1 (bash) and block 2 (python); skipped block 3 (text, example output).\n"
        ))
        shown = rec.final_code_executions()
        self.assertEqual(list(shown), [f"sandrun-{body['id']}-0", f"sandrun-{body['id']}-1"])
        first, second = shown.values()
        self.assertEqual((first["name"], first["language"]), ("Block 1 (bash)", "bash"))
        self.assertEqual(first["result"]["files"], [])
        self.assertEqual([f["name"] for f in second["result"]["files"]], ["plot.png", "data.csv"])
        self.assertEqual(rec.statuses()[-1], {"description": "The code ran successfully in 2.3 s.",
                                              "done": True, "hidden": False})


class ValvesNotSet(unittest.TestCase):
    def test_service_url_missing_or_without_scheme(self):
        tools, _, _ = owui.load_plugin(TOOL_FILE, "Tools")
        for url, sentence in (
            ("", "The 'service_url' valve is not set to a web address: set it to sandrun's, "
                 "e.g. http://127.0.0.1:8080."),
            ("sandrun:8080/", "The 'service_url' valve (sandrun:8080) must start with http:// "
                              "or https://."),
        ):
            with self.subTest(url=url):
                owui.set_valves(tools, service_url=url)
                text = owui.run(owui.call_tool(tools, "run_bash", {"command": "true"},
                                               owui.user(), "c1", owui.Recorder()))
                self.assertEqual(text, "sandrun could not run the code: " + sentence)


class WhatThePluginsSend(unittest.TestCase):
    """The requests themselves, as sandrun receives them."""

    def setUp(self):
        self.fake = FakeSandrun(200, canned_markdown_result("http://sandrun.test"))
        self.addCleanup(self.fake.close)

    def test_action_sends_the_answer_as_markdown_with_identity_and_limits(self):
        action, _, _ = owui.load_plugin(ACTION_FILE, "Action")
        owui.set_valves(action, service_url=self.fake.url + "/run", token="t0k",
                        wall_time_s=45, memory_mb=1024)
        answer = (
            '<details type="reasoning" done="true" duration="2">\n<summary>Thought for 2 '
            'seconds</summary>\n> ```python\n> print("draft")\n> ```\n</details>\n'
            "Here it is:\n\n```python\nprint(1)\n```\n"
        )
        earlier_run = ("\n\n---\n**sandrun:** The code ran successfully in 0.1 s.\n\n"
                       "```text\n1\n```\n")
        body = owui.action_body(answer + earlier_run, "chat-42")
        person = owui.user("user-7")
        owui.run(owui.call_action(action, body, person, owui.Recorder()))
        ((path, headers, sent),) = self.fake.requests
        self.assertEqual(path, "/run")
        self.assertEqual(headers["Authorization"], "Bearer t0k")
        self.assertEqual(sent, {
            "markdown": "Here it is:\n\n```python\nprint(1)\n```\n",
            "user": "user-7",
            "session": "chat-42",
            "limits": {"wall_time_s": 45, "cpu_time_s": 45, "memory_mb": 1024},
        })

    def test_tool_sends_code_with_identity(self):
        tools, _, _ = owui.load_plugin(TOOL_FILE, "Tools")
        owui.set_valves(tools, service_url=self.fake.url, network=True, wall_time_s=0)
        owui.run(owui.call_tool(tools, "run_bash", {"command": "ls"}, owui.user("user-8"),
                                "chat-43", owui.Recorder()))
        ((_, headers, sent),) = self.fake.requests
        self.assertNotIn("Authorization", headers)
        self.assertEqual(sent, {"language": "bash", "code": "ls", "user": "user-8",
                                "session": "chat-43", "network": True, "stateful": True})


class AnswersTheServiceRarelyGives(unittest.TestCase):
    """Every answer gets a sentence a person understands."""

    CASES = [
        (400, error("not_supported", "'markdown' is part of the API but not supported by this "
                                     "server version yet; send 'language' and 'code'"), None,
         "This sandrun server does not support that request yet: 'markdown' is part of the API "
         "but not supported by this server version yet; send 'language' and 'code'."),
        (409, error("session_busy", "session busy"), None,
         "An earlier run in this chat is still going: try again when it has finished."),
        (413, error("body_too_large", "request body too large"), None,
         "This is too large for sandrun to accept (HTTP 413)."),
        (429, error("rate_limited", "too many requests"), None,
         "Too many runs for this user right now: wait a few seconds and try again."),
        (503, error("busy", "all sandboxes are busy; retry shortly"),
         {"Content-Type": "application/json", "Retry-After": "5"},
         "sandrun is busy: all its sandboxes are in use. Try again in 5 s."),
        (503, error("unavailable", "this host cannot run sandboxes: no user namespaces"), None,
         "sandrun cannot run code right now: this host cannot run sandboxes: no user namespaces."),
        (500, error("sandbox_error", "run 1f: pivot_root failed"), None,
         "sandrun could not build a sandbox for this run: run 1f: pivot_root failed."),
        (502, error("unavailable", "the sandrun daemon is not reachable"), None,
         "nginx in front of sandrun cannot reach the sandrun daemon: is sandrund running?"),
        (302, b"", {"Location": "https://sandrun.example.org/run"},
         "{url} answered with a redirect to https://sandrun.example.org/run. Put the final "
         "address in the 'service_url' valve: redirects are not followed."),
        (200, b"<html>Open WebUI</html>", {"Content-Type": "text/html"},
         "{url} answered, but not with a sandrun run result. Check that the 'service_url' valve "
         "points at sandrun's nginx."),
        (404, b"<html>Not Found</html>", {"Content-Type": "text/html"},
         "{url} answered HTTP 404 with something that is not sandrun's JSON: <html>Not "
         "Found</html>. Check that the 'service_url' valve points at sandrun's nginx."),
    ]

    def test_action_and_tool_say_what_went_wrong(self):
        action, _, _ = owui.load_plugin(ACTION_FILE, "Action")
        tools, _, _ = owui.load_plugin(TOOL_FILE, "Tools")
        for status, body, headers, sentence in self.CASES:
            fake = FakeSandrun(status, body, headers)
            try:
                expected = sentence.format(url=fake.url)
                with self.subTest(status=status, body=body):
                    owui.set_valves(action, service_url=fake.url)
                    rec = owui.Recorder()
                    owui.run(owui.call_action(action, owui.action_body("```python\n1\n```",
                                                                       "c1"), owui.user(), rec))
                    self.assertEqual(rec.statuses()[-1]["description"], expected)
                    self.assertEqual(rec.appended(), f"\n\n---\n**sandrun:** {expected}\n")
                    owui.set_valves(tools, service_url=fake.url)
                    text = owui.run(owui.call_tool(tools, "run_python", {"code": "1"},
                                                   owui.user(), "c1", owui.Recorder()))
                    self.assertEqual(text, "sandrun could not run the code: " + expected)
            finally:
                fake.close()


def ndjson(*events) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


class _BrokenReader:
    """A stream whose connection drops after `lines` lines (what http.client raises then)."""

    def __init__(self, lines: bytes, error: Exception):
        self.lines, self.error = io.BytesIO(lines), error

    def readline(self):
        line = self.lines.readline()
        if not line:
            raise self.error
        return line


class StreamedRuns(unittest.TestCase):
    """Reading a streamed /run (the wire format of DESIGN.md's streamed-run section) and
    showing it, apart from the server: the lines are given, the run is not."""

    RESULT = {"id": "r1", "status": "ok", "exit_code": 0, "signal": None,
              "stdout": "one\ntwo\n", "stderr": "warn\n", "files": [],
              "usage": {"wall_ms": 3000}, "limits": {}}

    def setUp(self):
        self.action, self.action_module, _ = owui.load_plugin(ACTION_FILE, "Action")
        self.tools, self.tool_module, _ = owui.load_plugin(TOOL_FILE, "Tools")

    def test_events_fill_the_output_so_far_and_the_result_is_the_reply(self):
        lines = ndjson(
            {"event": "plan", "plan": [{"index": 0, "language": "python", "run": True}]},
            {"event": "step", "index": 0, "language": "python"},
            {"event": "stdout", "index": 0, "text": "one\n"},
            {"event": "keepalive"},
            {"event": "stderr", "index": 0, "text": "warn\n"},
            {"event": "something_new", "index": 0, "text": "ignored"},
            {"event": "stdout", "index": 0, "text": "two\n", "extra": 1},
            {"event": "step_end", "index": 0, "status": "ok", "exit_code": 0},
            {"event": "step", "index": 2, "language": "bash"},
            {"event": "display", "display": {"kind": "text", "text": "x"}},
            {"event": "step", "index": "3; rm", "language": None},  # an index is a number
            {"event": "stdout", "index": [1], "text": "odd\n"},
            {"event": "result", "result": self.RESULT},
        ) + b"\n"  # nothing may come after the result; an empty line is no event either
        for m in (self.action_module, self.tool_module):
            live = m.LiveOutput()
            reply = m.read_stream(io.BytesIO(lines), live, "http://sandrun.test", {"a": "b"})
            self.assertEqual((reply.status, reply.body, reply.headers),
                             (200, self.RESULT, {"a": "b"}))
            self.assertEqual(live.snapshot(), [
                {"index": 0, "language": "python", "stdout": "one\ntwo\n", "stderr": "warn\n",
                 "status": "ok"},
                {"index": 2, "language": "bash", "stdout": "", "stderr": "", "status": None},
                {"index": 2, "language": "", "stdout": "", "stderr": "", "status": None},
                {"index": 3, "language": "", "stdout": "odd\n", "stderr": "", "status": None},
            ])
            self.assertEqual(m.live_output_text(live.snapshot()[0], 100),
                             "one\ntwo\n[stderr]\nwarn\n")
        entries = [e["data"] for e in self.action._live_entries("m1", live.snapshot())]
        shown = [(e["id"], e["name"], e.get("result", {}).get("output")) for e in entries]
        self.assertEqual(shown, [
            ("sandrun-m1-0", "Block 1 (python)", "one\ntwo\n[stderr]\nwarn\n"),
            ("sandrun-m1-1", "Block 3 (bash) · running…", None),
            ("sandrun-m1-2", "Block 3 (untagged) · running…", None),
            ("sandrun-m1-3", "Block 4 (untagged) · running…", "odd\n"),
        ])

    def test_an_error_event_is_a_failure_sentence(self):
        m = self.action_module
        lines = ndjson({"event": "step", "index": 0, "language": "python"},
                       {"event": "error", "error": {"code": "internal", "message": "disk full"}})
        reply = m.read_stream(io.BytesIO(lines), m.LiveOutput(), "http://sandrun.test", {})
        self.assertEqual(m.failure_sentence(reply, "http://sandrun.test"),
                         "sandrun failed with an internal error: disk full.")

    def test_a_stream_that_breaks_off_is_one_sentence(self):
        m = self.tool_module
        start = ndjson({"event": "step", "index": 0, "language": "python"},
                       {"event": "stdout", "index": 0, "text": "one\n"})
        cases = (
            (io.BytesIO(start), "the stream ended early"),
            (io.BytesIO(start + b'{"event": "stdout", "ind'), "a line of the stream was cut"),
            (_BrokenReader(start, ConnectionResetError(104, "Connection reset by peer")),
             "Connection reset by peer"),
            (_BrokenReader(start, http.client.IncompleteRead(b"")), "IncompleteRead"),
            (_BrokenReader(start, TimeoutError()), "sandrun sent nothing for too long"),
        )
        for reader, why in cases:
            live = m.LiveOutput()
            with self.assertRaises(m.Unreachable) as caught:
                m.read_stream(reader, live, "http://sandrun.test/", {})
            sentence = str(caught.exception)
            self.assertTrue(sentence.startswith("The connection to sandrun at "
                                                "http://sandrun.test broke off during the run ("),
                            sentence)
            self.assertIn(why, sentence)
            self.assertTrue(sentence.endswith("the run was stopped. Run it again."), sentence)
            self.assertEqual(live.snapshot()[0]["stdout"], "one\n")

    def test_live_entries_are_emitted_only_when_changed(self):
        m = self.action_module
        rec = owui.Recorder()
        entries = m.LiveEntries(rec)
        first = m.code_execution_event("e1", "Block 1", "python", "", {"output": "a"})
        second = m.code_execution_event("e2", "Block 2", "python", "", None)
        owui.run(entries.show([first, second]))
        owui.run(entries.show([first, second]))
        changed = m.code_execution_event("e1", "Block 1", "python", "", {"output": "ab"})
        owui.run(entries.show([changed, second]))
        self.assertEqual([(e["data"]["id"], e["data"].get("result")) for e in rec.events],
                         [("e1", {"output": "a"}), ("e2", None), ("e1", {"output": "ab"})])

    def test_an_action_whose_stream_breaks_off_says_so_in_every_entry_it_showed(self):
        m = self.action_module
        broke = "The connection to sandrun at http://sandrun.test broke off during the run."

        def streamed_run(base_url, token, payload, timeout_s, live=None):
            for index in (0, 1):
                live.add({"event": "step", "index": index, "language": "python"})
                live.add({"event": "stdout", "index": index, "text": f"block {index}\n"})
            for _ in range(200):  # until the chat has shown both blocks running (<= 10 s)
                if seen:
                    break
                time.sleep(0.05)
            raise m.Unreachable(broke)

        seen = []
        m.post_run = streamed_run
        owui.set_valves(self.action, service_url="http://sandrun.test", ask_for_input=False)
        rec = owui.Recorder()

        async def emitter(event):
            await rec(event)
            if "running" in event["data"].get("name", "") and event["data"]["id"].endswith("-1"):
                seen.append(event)
        body = owui.action_body("```python\nprint(1)\n```\n\n```python\nprint(2)\n```\n", "c1")
        owui.run(owui.call_action(self.action, body, owui.user(), emitter))
        first, second = rec.final_code_executions().values()
        self.assertEqual((first["name"], first["result"]["error"]), ("sandrun", broke))
        self.assertEqual((second["name"], second["result"]),
                         ("Block 2 (python)", {"output": "block 1\n", "error":
                                               "The run did not finish.", "files": []}))
        self.assertEqual(rec.appended(), "\n\n---\n**sandrun:** " + broke + "\n")

    def test_a_slow_program_is_shown_about_once_a_second_and_not_when_unchanged(self):
        """The Tool with a run that prints every 0.1 s for 2 s, then nothing for 1.5 s: its
        entry shows the output so far at most about once a second, and not again while the
        output stays the same (the stream is stood in for by filling LiveOutput in time)."""
        result = dict(self.RESULT, stdout="".join(f"tick {i}\n" for i in range(20)), stderr="")

        def streamed_run(base_url, token, payload, timeout_s, live=None):
            self.assertIsNotNone(live, "the Tool asks for the stream")
            live.add({"event": "step", "index": 0, "language": "python"})
            for i in range(20):
                live.add({"event": "stdout", "index": 0, "text": f"tick {i}\n"})
                time.sleep(0.1)
            quiet_from.append(time.monotonic())
            time.sleep(1.5)
            return self.tool_module.Reply(200, result, json.dumps(result), {})

        quiet_from = []
        self.tool_module.post_run = streamed_run
        owui.set_valves(self.tools, service_url="http://sandrun.test")
        rec = owui.Recorder()
        text = owui.run(owui.call_tool(self.tools, "run_python", {"code": "..."}, owui.user(),
                                       "chat-1", rec))
        self.assertIn("tick 19", text)
        updates = owui.entry_updates(rec.events, rec.times)
        live = owui.check_live_updates(self, updates, "tick 0", "tick 19")
        self.assertTrue(all(d["name"] == "Python · running…" for _, d in live))
        # One more update at most once the output stopped changing (what came before it).
        self.assertLessEqual(sum(t > quiet_from[0] + 0.05 for t, _ in live), 1, live)
        # Within 3.5 s, at most 4 updates (a flood would be 20).
        self.assertLessEqual(len(live), 4)


if __name__ == "__main__":
    unittest.main()
