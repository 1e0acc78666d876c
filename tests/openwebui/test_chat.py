"""The plugins in a chat as Open WebUI keeps and shows it (owui_chat.py: its saved chats, its
event emitter, an open chat page, its renderer's choice of what to show), on Open WebUI 0.10.2
(answers with structured `output` items) and on the 0.6-0.9 line (answers with `content`
only), against the real stack (nginx + sandrund, stack.py).

Run by ctest as `openwebui.chat`; by hand (as root, after a build):
  cd tests/openwebui && SANDRUN_BUILD_DIR=/path/to/build python3 -m unittest -v test_chat
"""

import os
import shutil
import tempfile
import unittest
import uuid

import owui
import owui_chat
from owui_chat import OpenWebUI
from stack import Stack

from plugin_files import ACTION_FILE, TOOL_FILE, fetch, markdown_links
PNG = b"\x89PNG\r\n\x1a\n"

STACK = None


def setUpModule():
    global STACK
    STACK = Stack.start()


def tearDownModule():
    if STACK is not None:
        STACK.stop()


# One Python block: it prints, shows a chart, saves a CSV and ends on a DataFrame.
ANSWER = (
    "Here is the analysis:\n\n"
    "```python\nimport matplotlib.pyplot as plt\nimport pandas as pd\n"
    "df = pd.DataFrame({'city': ['Paris', 'Oslo'], 'temp': [12.5, 3.25]})\n"
    "df.to_csv('temps.csv', index=False)\n"
    "print('mean', df['temp'].mean())\n"
    "df.plot.bar(x='city', y='temp')\n"
    "plt.show()\n"
    "df\n```\n\nThe chart compares the two cities.\n"
)


class WebUICase(unittest.TestCase):
    VERSION = "0.10.2"

    def setUp(self):
        self.store = tempfile.mkdtemp(prefix="owui-files.")
        self.addCleanup(shutil.rmtree, self.store, True)
        self.webui = OpenWebUI(self.VERSION, self.store)
        self.user = owui.user()
        self.action, _, _ = owui.load_plugin(ACTION_FILE, "Action")
        owui.set_valves(self.action, service_url=STACK.base_url, token=STACK.token,
                        wall_time_s=60)

    def chat(self, answer: str = ANSWER):
        return self.webui.new_chat(self.user, answer, structured=self.webui.new)

    def click(self, chat_id: str, inputs=None):
        tab = self.webui.open_tab(chat_id, inputs)
        with self.webui.installed():
            owui.run(tab.click_action(self.action, self.user))
        return tab

    def assert_result_shown(self, shown: dict, original: str = "df.to_csv"):
        """Output, chart, table, links and summary in what the page shows of the answer."""
        text = shown["markdown"]
        self.assertIn(original, text, "the answer itself is still shown")
        self.assertIn("**sandrun:** The code ran successfully in", text)   # the summary
        self.assertIn("mean 7.875", text)                                  # the output
        self.assertIn("| 0 | Paris | 12.5 |", text)                        # the table
        self.assertNotIn("0  Paris  12.50", text)                          # ... once
        links = markdown_links(text)
        self.assertTrue(links["figure-1.png"][0], "the chart is an inline image")
        self.assertFalse(links["temps.csv"][0])
        self.assertTrue(links["temps.csv"][1].startswith(STACK.base_url + "/files/"))
        self.assertEqual(fetch(links["temps.csv"][1])[2].decode().splitlines(),
                         ["city,temp", "Paris,12.5", "Oslo,3.25"])
        self.assertIn("Ran block 1 (python).", text)
        entries = shown["code_executions"]
        self.assertEqual([e["name"] for e in entries], ["Block 1 (python)"])
        self.assertIn("mean 7.875", entries[0]["result"]["output"])
        return links


class ActionOnOpenWebUI010(WebUICase):
    """Open WebUI 0.10.2: the page renders `output` items and not `content`."""

    def test_renderer_model_shows_output_not_content(self):
        # The reduction's rule, as ContentRenderer.svelte has it: with `output` items,
        # appending to `content` shows nothing (what the Action did before).
        message = {"content": "old text + appended", "output": [owui_chat_item("old text")]}
        self.assertEqual(self.webui.rendered(message)["markdown"], "old text")
        self.assertEqual(OpenWebUI("0.9", self.store).rendered(message)["markdown"],
                         "old text + appended")

    def test_result_is_shown_and_saved(self):
        chat_id, answer_id = self.chat()
        tab = self.click(chat_id)
        live = self.webui.rendered(tab.message(answer_id))
        saved = self.webui.rendered(self.webui.saved_message(chat_id, answer_id))
        for what, shown in (("in the open page", live), ("in the saved chat", saved)):
            with self.subTest(what):
                links = self.assert_result_shown(shown)
                # The chart is in Open WebUI's file store, under this user, linked to the
                # answer: a link that does not expire.
                url = links["figure-1.png"][1]
                record = self.webui.file_by_url(url)
                self.assertIsNotNone(record, url)
                self.assertEqual(record.user_id, self.user["id"])
                self.assertEqual(record.meta, {"chat_id": chat_id, "message_id": answer_id})
                with open(record.path, "rb") as f:
                    self.assertTrue(f.read().startswith(PNG))
                self.assertTrue(shown["statuses"][-1].startswith("The code ran successfully"))
        # One output item of the Action's, after the answer's own items.
        output = self.webui.saved_message(chat_id, answer_id)["output"]
        self.assertEqual([i["type"] for i in output], ["reasoning", "message", "message"])
        self.assertTrue(output[-1]["id"].startswith("sandrun-output-"))

    def test_saved_even_when_the_tab_is_closed(self):
        chat_id, answer_id = self.chat()
        with self.webui.installed():
            owui.run(owui_chat.click_without_tab(self.webui, self.action, chat_id, answer_id,
                                                 self.user))
        self.assert_result_shown(self.webui.rendered(
            self.webui.saved_message(chat_id, answer_id)))

    def test_a_refused_run_says_why_where_the_page_looks(self):
        owui.set_valves(self.action, service_url=STACK.base_url, token="not-the-token")
        chat_id, answer_id = self.chat()
        tab = self.click(chat_id)
        sentence = ("sandrun refused the bearer token: put a valid token in the plugin's "
                    "'token' valve.")
        for message in (tab.message(answer_id), self.webui.saved_message(chat_id, answer_id)):
            shown = self.webui.rendered(message)
            self.assertIn("**sandrun:** " + sentence, shown["markdown"])
            self.assertIn("df.to_csv", shown["markdown"])
            self.assertEqual(shown["code_executions"][0]["result"]["error"], sentence)
            self.assertEqual(shown["statuses"][-1], sentence)

    def test_the_code_run_is_the_output_items_even_if_content_is_empty(self):
        # The server saves a 0.10 answer's `output`; its `content` may be empty in a page.
        chat_id, answer_id = self.chat()
        self.webui.chats[chat_id]["chat"]["history"]["messages"][answer_id]["content"] = ""
        tab = self.click(chat_id)
        self.assert_result_shown(self.webui.rendered(tab.message(answer_id)))

    def test_a_second_run_replaces_the_first_result(self):
        chat_id, answer_id = self.chat()
        self.click(chat_id)
        tab = self.click(chat_id)
        saved = self.webui.saved_message(chat_id, answer_id)
        self.assertEqual([i["id"] for i in saved["output"]][-1:],
                         [f"sandrun-output-{answer_id}"])
        self.assertEqual(sum(i["id"].startswith("sandrun-") for i in saved["output"]), 1)
        for message in (saved, tab.message(answer_id)):
            text = self.webui.rendered(message)["markdown"]
            self.assertEqual(text.count("**sandrun:**"), 1, text)
            self.assertIn("mean 7.875", text)
            self.assertIn("![figure-1.png](/api/v1/files/", text)
            self.assertIn("df.to_csv", text)


class ActionOnOpenWebUI09(WebUICase):
    """The 0.6-0.9 line: no `output`; the page renders `content`."""

    VERSION = "0.9"

    def test_result_is_shown_and_saved(self):
        chat_id, answer_id = self.chat()
        tab = self.click(chat_id)
        for message in (tab.message(answer_id), self.webui.saved_message(chat_id, answer_id)):
            self.assertNotIn("output", message)
            links = self.assert_result_shown(self.webui.rendered(message))
            # No image store to use: the chart keeps sandrun's signed link.
            url = links["figure-1.png"][1]
            self.assertTrue(url.startswith(STACK.base_url + "/files/"), url)
            status, ctype, data = fetch(url)
            self.assertEqual((status, ctype), (200, "image/png"))
            self.assertTrue(data.startswith(PNG))

    def test_saved_even_when_the_tab_is_closed(self):
        chat_id, answer_id = self.chat()
        with self.webui.installed():
            owui.run(owui_chat.click_without_tab(self.webui, self.action, chat_id, answer_id,
                                                 self.user))
        self.assert_result_shown(self.webui.rendered(
            self.webui.saved_message(chat_id, answer_id)))


class ActionAsksForInput(WebUICase):
    """A program that reads stdin: the Action asks in Open WebUI's input dialog first."""

    ANSWER = "```python\nname = input('Your name? ')\nprint('Hello,', name)\n```\n"

    def test_typed_input_is_the_programs_stdin(self):
        chat_id, answer_id = self.chat(self.ANSWER)
        tab = self.click(chat_id, inputs=["Ada"])
        (asked,) = tab.asked
        self.assertEqual(asked["type"], "input")
        self.assertEqual(set(asked["data"]), {"title", "message", "placeholder"})
        self.assertEqual(asked["data"]["title"], "This code reads input")
        text = self.webui.rendered(tab.message(answer_id))["markdown"]
        self.assertIn("Hello, Ada", text)
        self.assertIn("The code ran successfully", text)

    def test_cancel_runs_without_input(self):
        chat_id, answer_id = self.chat(self.ANSWER)
        tab = self.click(chat_id, inputs=[False])
        self.assertEqual(len(tab.asked), 1)
        text = self.webui.rendered(tab.message(answer_id))["markdown"]
        self.assertNotIn("Hello, Ada", text)
        self.assertIn("EOFError", text)

    def test_no_dialog_for_code_that_reads_no_input(self):
        chat_id, _ = self.chat("```python\nprint('input(', \"sys.stdin\")  # input()\n```\n")
        tab = self.click(chat_id)
        self.assertEqual(tab.asked, [])


def owui_chat_item(text: str) -> dict:
    return {"type": "message", "id": "msg_x", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text}]}


class ToolOnOpenWebUI010(unittest.TestCase):
    """The Tool during an answer of Open WebUI 0.10.2 (middleware.py calls it with the
    emitter of the answer being written)."""

    def setUp(self):
        self.store = tempfile.mkdtemp(prefix="owui-files.")
        self.addCleanup(shutil.rmtree, self.store, True)
        self.webui = OpenWebUI("0.10.2", self.store)
        self.user = owui.user()
        self.tools, _, _ = owui.load_plugin(TOOL_FILE, "Tools")
        owui.set_valves(self.tools, service_url=STACK.base_url, token=STACK.token,
                        wall_time_s=60)
        self.chat_id, self.answer_id = self.webui.new_chat(self.user, "Let me compute that.",
                                                           structured=True)
        self.tab = self.webui.open_tab(self.chat_id)
        self.tab.watch(self.answer_id)

    def call(self, name: str, **args):
        emitter = self.webui.event_emitter(self.chat_id, self.answer_id, self.tab)
        with self.webui.installed():
            text = owui.run(owui.call_tool(self.tools, name, args, self.user, self.chat_id,
                                           emitter, message_id=self.answer_id,
                                           request=owui_chat.REQUEST))
        self.assertIsInstance(text, str)
        return text, emitter.events

    def test_stateful_dataframe_is_a_markdown_table_for_the_model(self):
        text, _ = self.call("run_python",
                            code="import pandas as pd\n"
                                 "pd.DataFrame({'city': ['Paris', 'Oslo'], 'temp': [12.5, 3.25]})")
        self.assertTrue(text.startswith("status: ok (kernel started, cell 1"), text)
        self.assertIn("| city | temp |", text)
        self.assertRegex(text, r"\| 0 \| Paris \| 12\.50? \|")
        for html in ("<table", "&lt;", "<div", "<style"):
            self.assertNotIn(html, text)
        # The value once: as the table, not also as the kernel's text form.
        self.assertNotIn("0  Paris  12.50", text)

    def test_stateful_figure_reaches_the_chat_without_the_model(self):
        text, events = self.call("run_python",
                                 code="import matplotlib.pyplot as plt\n"
                                      "plt.plot([1, 4, 9])\nplt.show()\nprint('drawn')")
        self.assertTrue(text.startswith("status: ok (kernel started"), text)
        self.assertIn("already shown to the user", text)
        # The shown figure is among the entry's files, and in the answer's files (images above
        # the answer), stored in Open WebUI's file store, in the page and in the saved chat.
        entry = [e["data"] for e in events if e["type"] == "source"][-1]
        self.assertEqual([f["name"] for f in entry["result"]["files"]], ["figure-1.png"])
        for message in (self.tab.message(self.answer_id),
                        self.webui.saved_message(self.chat_id, self.answer_id)):
            images = self.webui.rendered(message)["images_above"]
            self.assertEqual(len(images), 1, message.get("files"))
            record = self.webui.file_by_url(images[0])
            self.assertIsNotNone(record)
            with open(record.path, "rb") as f:
                self.assertTrue(f.read().startswith(PNG))
        # The entry is in the saved answer even if no page saves it.
        saved_entries = self.webui.saved_message(self.chat_id, self.answer_id)["code_executions"]
        self.assertEqual([e["id"] for e in saved_entries], [entry["id"]])
        self.assertEqual(saved_entries[0]["result"]["output"].strip(), "drawn")
        # A second call's image joins the first one's, in the page and in the saved chat.
        self.call("run_python", code="plt.plot([3, 2, 1])\nplt.show()")
        page = self.webui.rendered(self.tab.message(self.answer_id))["images_above"]
        saved = self.webui.rendered(
            self.webui.saved_message(self.chat_id, self.answer_id))["images_above"]
        self.assertEqual(len(page), 2)
        self.assertEqual(page, saved)


class ToolOnOpenWebUI09(unittest.TestCase):
    """The Tool on the 0.6-0.9 line: the images go to the answer's files all the same, with
    sandrun's links (no image store to use)."""

    def test_figure_reaches_the_chat_with_its_signed_link(self):
        store = tempfile.mkdtemp(prefix="owui-files.")
        self.addCleanup(shutil.rmtree, store, True)
        webui, person = OpenWebUI("0.9", store), owui.user()
        tools, _, _ = owui.load_plugin(TOOL_FILE, "Tools")
        owui.set_valves(tools, service_url=STACK.base_url, token=STACK.token, wall_time_s=60,
                        stateful=False)
        chat_id, answer_id = webui.new_chat(person, "Let me plot it.", structured=False)
        tab = webui.open_tab(chat_id)
        tab.watch(answer_id)
        emitter = webui.event_emitter(chat_id, answer_id, tab)
        with webui.installed():
            text = owui.run(owui.call_tool(
                tools, "run_python", {"code": "import matplotlib.pyplot as plt\n"
                                              "plt.plot([1, 2])\nplt.show()"},
                person, chat_id, emitter, message_id=answer_id, request=owui_chat.REQUEST))
        self.assertTrue(text.startswith("status: ok (exit code 0"), text)
        for message in (tab.message(answer_id), webui.saved_message(chat_id, answer_id)):
            (url,) = webui.rendered(message)["images_above"]
            self.assertTrue(url.startswith(STACK.base_url + "/files/"), url)
            self.assertTrue(fetch(url)[2].startswith(PNG))
        self.assertEqual(webui.files, {})


def valves_schema(instance) -> dict:
    valves = instance.Valves
    return valves.model_json_schema() if hasattr(valves, "model_json_schema") else valves.schema()


class PluginTexts(unittest.TestCase):
    """Texts and checks of the plugins that need no service."""

    @classmethod
    def setUpClass(cls):
        _, cls.action_module, _ = owui.load_plugin(ACTION_FILE, "Action")
        _, cls.tool_module, _ = owui.load_plugin(TOOL_FILE, "Tools")

    def test_html_table_becomes_markdown(self):
        html = ('<div>\n<style scoped>\n    .dataframe tbody tr th:only-of-type {\n'
                '        vertical-align: middle;\n    }\n</style>\n'
                '<table border="1" class="dataframe">\n  <thead>\n'
                '    <tr style="text-align: right;">\n      <th></th>\n      <th>city</th>\n'
                '      <th>a|b</th>\n    </tr>\n  </thead>\n  <tbody>\n    <tr>\n'
                '      <th>0</th>\n      <td>Paris &amp; co</td>\n      <td>12.5</td>\n'
                '    </tr>\n  </tbody>\n</table>\n<p>1 rows × 2 columns</p>\n</div>')
        for module in (self.action_module, self.tool_module):
            self.assertEqual(module.html_table_markdown(html),
                             "|  | city | a\\|b |\n|---|---|---|\n| 0 | Paris & co | 12.5 |\n\n"
                             "1 rows × 2 columns")
            parts = module.displays_markdown({"displays": [
                {"kind": "table", "mime": "text/html", "text": html}]})
            self.assertEqual(len(parts), 1)
            self.assertNotIn("<", parts[0].replace("&lt;", ""))
            self.assertNotIn("style", parts[0])

    def test_a_shown_table_is_not_repeated_as_text(self):
        printed = "mean 7.875\n    city   temp\n0  Paris  12.50\n1   Oslo   3.25\n"
        markdown = {"displays": [{"kind": "table", "mime": "text/markdown",
                                  "text": "|  | city | temp |\n|---|---|---|\n"
                                          "| 0 | Paris | 12.5 |\n| 1 | Oslo | 3.25 |"}]}
        html = {"displays": [{"kind": "table", "mime": "text/html", "text":
                              "<table><tr><th></th><th>city</th><th>temp</th></tr>"
                              "<tr><th>0</th><td>Paris</td><td>12.50</td></tr>"
                              "<tr><th>1</th><td>Oslo</td><td>3.25</td></tr></table>"}]}
        for module in (self.action_module, self.tool_module):
            self.assertEqual(module.without_shown_tables(printed, markdown), "mean 7.875\n")
            self.assertEqual(module.without_shown_tables(printed, html), "mean 7.875\n")
            # Printed differently (another value): kept.
            other = printed.replace("3.25", "3.5")
            self.assertEqual(module.without_shown_tables(other, markdown), other)
            self.assertEqual(module.without_shown_tables(printed, {"displays": []}), printed)

    def test_only_http_image_links_are_fetched_into_open_webui(self):
        # A response naming a file: URL must not make Open WebUI's server read its own files.
        store = tempfile.mkdtemp(prefix="owui-files.")
        self.addCleanup(shutil.rmtree, store, True)
        local = os.path.join(store, "secret.png")
        with open(local, "wb") as f:
            f.write(PNG + b"not for the chat")
        webui, person = OpenWebUI("0.10.2", store), owui.user()
        webui.users[person["id"]] = person
        for module in (self.action_module, self.tool_module):
            for url in ("file://" + local, "ftp://127.0.0.1/x.png", "/etc/x.png"):
                f = {"name": "x.png", "url": url, "mime": "image/png"}
                with webui.installed():
                    kept = owui.run(module.keep_image(f, owui_chat.REQUEST, person,
                                                      {"chat_id": "c", "message_id": "m"}))
                self.assertEqual(kept, url)
        self.assertEqual(webui.files, {})

    def test_stdin_readers_are_recognised(self):
        reads = self.action_module.reads_stdin
        for code in ("```python\nx = input('n? ')\n```",
                     "```py\nimport sys\ndata = sys.stdin.read()\n```",
                     "```bash\nread -p 'name? ' name\necho $name\n```",
                     "```sh\nwhile read line; do echo $line; done\n```"):
            self.assertTrue(reads(code), code)
        for code in ("```python\nprint('hi')  # input()\n```", "```text\ninput()\n```",
                     "```python\nprint('input(', \"read sys.stdin\")\n```",
                     "```bash\nwhile read line; do echo $line; done < list.txt\n```",
                     "no code at all: input()"):
            self.assertFalse(reads(code), code)

    def test_output_headers_count_from_1_and_only_for_blocks_that_printed(self):
        numbered = self.action_module.people_numbered
        steps = [{"index": 0}, {"index": 1}, {"index": 2}]
        joined = ("--- block 0 (bash, install) ---\nok\n--- block 1 (python, main) ---\n"
                  "--- block 2 (python, main) ---\n42\n")
        self.assertEqual(numbered(joined, steps),
                         "--- block 1 (bash, install) ---\nok\n"
                         "--- block 3 (python, main) ---\n42\n")
        # Headers already counted from 1 (the index + 1 of each step) stay as they are.
        ones = "--- block 2 (python) ---\n1\n--- block 3 (python) ---\n2\n"
        self.assertEqual(numbered(ones, [{"index": 1}, {"index": 2}]), ones)
        # Which step printed the text under a header decides: block 2's traceback under
        # "block 1" is 0-based; under "block 2", it counts from 1 already.
        steps = [{"index": 0, "stderr": ""}, {"index": 1, "stderr": "Traceback\nNameError\n"}]
        self.assertEqual(numbered("--- block 1 (python) ---\nTraceback\nNameError\n", steps,
                                  "stderr"), "--- block 2 (python) ---\nTraceback\nNameError\n")
        self.assertEqual(numbered("--- block 2 (python) ---\nTraceback\nNameError\n", steps,
                                  "stderr"), "--- block 2 (python) ---\nTraceback\nNameError\n")

    def test_token_valves_are_masked_and_tool_valves_name_the_kernel(self):
        for path, cls in ((ACTION_FILE, "Action"), (TOOL_FILE, "Tools")):
            instance, _, _ = owui.load_plugin(path, cls)
            token = valves_schema(instance)["properties"]["token"]
            # pydantic 2 (Open WebUI's) puts json_schema_extra into the property, where
            # Valves.svelte looks for input.type "password"; pydantic 1 keeps it by its name.
            masked = token.get("input") or token.get("json_schema_extra", {}).get("input")
            self.assertEqual(masked, {"type": "password"}, path)
        tools, _, _ = owui.load_plugin(TOOL_FILE, "Tools")
        props = valves_schema(tools)["properties"]
        for name in ("memory_mb", "network", "packages", "stateful"):
            self.assertRegex(props[name]["description"],
                             r"new kernel|kernel ends|ends the chat's kernel", name)
        self.assertIn("keeps the chat's kernel", props["wall_time_s"]["description"])


if __name__ == "__main__":
    unittest.main()
