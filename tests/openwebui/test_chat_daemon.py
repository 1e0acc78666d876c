"""The Run button on Open WebUI 0.10.2 (owui_chat.py) for answers whose handling is the
daemon's: an answer run as a notebook (consecutive Python blocks share one interpreter), plan
texts counting blocks from 1, and a re-run offering its files again. These tests need those
daemon changes; they are a ctest of their own (`openwebui.chat_daemon`) so that
`openwebui.chat` tests the plugins alone.

  cd tests/openwebui && SANDRUN_BUILD_DIR=/path/to/build python3 -m unittest -v test_chat_daemon
"""

import re
import unittest

import test_chat
from stack import Stack
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


if __name__ == "__main__":
    unittest.main()
