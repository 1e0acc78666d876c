"""sandrun_loader's trailing expression without the syntax tree: for every program,
the split it makes by compiling (head, tail) must be the one the syntax tree gives, or it must
leave the program to the tree. Each case is run both ways and compared: what is shown, what is
printed or raised, the line the trailing expression starts on, and how many compile warnings
appear. The interpreter's own compiler (through _ctypes) must give what compile() gives.
"""

import contextlib
import io
import os
import random
import subprocess
import sys
import unittest
import warnings

SUPPORT_DIR = os.environ.get("SANDRUN_PYTHON_DIR",
                             os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../src/python"))
sys.path.insert(0, SUPPORT_DIR)

import sandrun_loader as loader  # noqa: E402

# Programs whose last statement is or is not an expression, in the forms that make a split
# hard: brackets, strings and continuations across lines, compound statements and their
# continuation keywords, decorators, `;`, starred items, comments and blank lines after.
CASES = {
    "call": "print(1)\n",
    "no newline at the end": "x = 2\nx * 3",
    "assignment": "x = 1\n",
    "expression after assignment": "x = 1\nx + 1\n",
    "main guard": "def main():\n    return 5\n\nif __name__ == '__main__':\n    main()\n",
    "if else": "x = 1\nif x:\n    x\nelse:\n    -x\n",
    "try except finally": "try:\n    1 / 0\nexcept ZeroDivisionError:\n    pass\nfinally:\n    'f'\n",
    "decorated function": "import functools\n@functools.lru_cache\ndef f():\n    return 1\n",
    "multi-line call": "print(\n1,\n2)\n",
    "multi-line list": "[\n1,\n2\n]\n",
    "assignment of a multi-line dict": "d = {\n'a': 1,\n}\n",
    "triple-quoted string at the end": 's = 1\n"""\ntext\n"""\n',
    "string with code-like lines": 'x = """\nprint(2)\n"""\nlen(x)\n',
    "string ending in an expression line": 'x = """\n1\n"""\n',
    "string whose last line reads as an expression": "s = '''\n1 #'''\n",
    "backslash continuation": "y = 1 + \\\n2\ny\n",
    "continued assignment ending in an expression line": "y = 1 + \\\n2\n",
    "backslash before a statement": "a = 1; \\\nb = a\nb\n",
    "semicolons": "x = 1; x + 2\n",
    "semicolon after an expression": "x = 3\nx;\n",
    "starred tuple": "a = [1, 2]\n*a, 3\n",
    "starred at the start": "*range(2), 5\n",
    "multiplication in an assignment": "a = 2 * 3\n",
    "comment after": "x = 4\nx\n# done\n\n",
    "indented comment after": "x = 4\nx\n    # done\n",
    "empty": "",
    "only comments": "# a\n# b\n",
    "future annotations": "from __future__ import annotations\ndef f(x: Undefined) -> None: pass\nf.__annotations__\n",
    "class": "class A:\n    pass\nA.__name__\n",
    "with": "import io\nwith io.StringIO() as s:\n    s.write('x')\n",
    "for else": "for i in range(2):\n    pass\nelse:\n    i\n",
    "while": "n = 0\nwhile n < 2:\n    n += 1\n",
    "lambda": "f = lambda: 1\nf()\n",
    "walrus in parens": "(y := 5)\n",
    "yield in a function": "def g():\n    yield 1\nlist(g())\n",
    "async def": "async def f():\n    return 1\nf.__name__\n",
    "match": "x = 2\nmatch x:\n    case 2:\n        'two'\n",
    "global at module level": "global q\nq = 1\nq\n",
    "byte order mark": "\ufeffprint('bom')\n7\n",
    "coding cookie": "# -*- coding: latin-1 -*-\ns = 'caf\xe9'\nlen(s)\n",
    "carriage returns": "x = 1\r\nx\r\n",
    "form feed": "x = 1\n\fx\n",
    "none value": "None\n",
    "string literal concatenation": "('a'\n'b')\n",
    "dict display last": "{'a': 1}\n",
    "conditional expression": "1 if True else 2\n",
    "comprehension": "[i for i in range(3)]\n",
    "many lines at column zero in a string": 'x = 1\ns = """\n' + "\n".join("line %d" % i for i in range(12)) + '\n"""\n',
    "syntax warning in the head": "x = 1\nif x is 1:\n    pass\nx\n",
    "syntax warning in the tail": "x = 1\nx is 1\n",
    "non-ASCII text": "s = 'grüße 日本'\nlen(s)\n",
}


def _encode(text):
    return text.encode("latin-1") if "coding: latin-1" in text else text.encode("utf-8")


def _first_line(code):
    lines = [line for _, _, line in code.co_lines() if line is not None]
    return min(lines) if lines else None


def _outcome(body, last):
    """What running (body, last) prints, and the value shown or the exception raised."""
    out = io.StringIO()
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    with contextlib.redirect_stdout(out):
        try:
            exec(body, namespace)
            value = eval(last, namespace) if last is not None else None
        except Exception as error:  # noqa: BLE001 -- compared: both ways must raise it
            value = error
    return out.getvalue(), repr(value)


def _compile_counting_warnings(compile_, source):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = compile_(source, "<prog>")
    return result, len(seen)


def _quiet_compile(source):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compile(source, "<prog>", "exec", dont_inherit=True)


class SplitMatchesTheSyntaxTree(unittest.TestCase):
    def check(self, name, source):
        split = loader._split_trailing_expression(source, "<prog>", _quiet_compile(source))
        (tree_body, tree_last), tree_warnings = _compile_counting_warnings(loader._compile_with_tree, source)
        (fast_body, fast_last), fast_warnings = _compile_counting_warnings(loader._compile, source)
        self.assertEqual(fast_warnings, tree_warnings, name)
        self.assertEqual(_outcome(fast_body, fast_last), _outcome(tree_body, tree_last), name)
        if split is loader._UNSURE:
            return "unsure"
        self.assertEqual(split is None, tree_last is None, name)
        if tree_last is not None:
            self.assertEqual(_first_line(fast_last), _first_line(tree_last), name)
        return "split" if split is not None else "none"

    def test_cases(self):
        decided = {name: self.check(name, _encode(text)) for name, text in CASES.items()}
        # The common forms never need the tree.
        for name in ("call", "assignment", "expression after assignment", "main guard",
                     "multi-line call", "triple-quoted string at the end", "starred tuple",
                     "future annotations", "comment after", "with", "syntax warning in the tail",
                     "non-ASCII text"):
            self.assertNotEqual(decided[name], "unsure", name)
        # Forms it cannot tell are left to the tree.
        for name in ("semicolons", "coding cookie", "carriage returns", "form feed"):
            self.assertEqual(decided[name], "unsure", name)

    def test_random_programs(self):
        # Fragments joined at random, each program kept only if it compiles.
        fragments = [text for text in CASES.values()
                     if text and "coding" not in text and "\ufeff" not in text and "__future__" not in text]
        rng = random.Random(11)
        for i in range(400):
            text = "\n".join(rng.choice(fragments) for _ in range(rng.randint(1, 4)))
            try:
                _quiet_compile(text)
            except SyntaxError:
                continue
            self.check("random program %d:\n%s" % (i, text), text.encode())

    def test_trailing_expression_keeps_its_line_in_tracebacks(self):
        body, last = loader._compile(b"x = 0\n\n\n1 / x\n", "/home/user/main.py")
        namespace = {}
        exec(body, namespace)
        try:
            eval(last, namespace)
            self.fail("no ZeroDivisionError")
        except ZeroDivisionError as error:
            frame = error.__traceback__.tb_next
            self.assertEqual((frame.tb_frame.f_code.co_filename, frame.tb_lineno), ("/home/user/main.py", 4))

    def test_syntax_error_is_the_programs_own(self):
        for source in (b"x = 1\nprint(x\n", b"x = 1\n  y = 2\n", b"a = 1\0\n"):
            with self.assertRaises((SyntaxError, ValueError)) as fast:
                loader._compile(source, "/home/user/main.py")
            with self.assertRaises((SyntaxError, ValueError)) as builtin:
                compile(source, "/home/user/main.py", "exec", dont_inherit=True)
            self.assertEqual(type(fast.exception), type(builtin.exception), source)
            self.assertEqual(str(fast.exception), str(builtin.exception), source)
            self.assertEqual(getattr(fast.exception, "filename", None), getattr(builtin.exception, "filename", None))

    def test_interpreter_compiler_matches_compile(self):
        self.assertIsNotNone(loader._COMPILER, "Debian's python3 has _ctypes")
        for text in CASES.values():
            source = _encode(text)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mine = loader._compile_text(source, "/home/user/main.py", "exec")
                theirs = compile(source, "/home/user/main.py", "exec", dont_inherit=True)
            self.assertEqual(mine.co_code, theirs.co_code, text)
            self.assertEqual(mine.co_consts, theirs.co_consts, text)
            self.assertEqual(mine.co_filename, theirs.co_filename)
            self.assertEqual(mine.co_flags, theirs.co_flags, text)

    def test_common_programs_never_call_the_builtin_compile(self):
        # compile() would make the syntax tree's node types (~2 ms); trapped after the import
        # (the import itself compiles this source when there is no bytecode).
        code = ("import builtins, sys; sys.path.insert(0, %r); import sandrun_loader as l\n"
                "def trap(*args, **kwargs):\n    raise AssertionError('compile() called')\n"
                "builtins.compile = trap\n"
                "for p in (b'x = 1\\nprint(x)\\n', b'x = 2\\nx\\n', b'if 1:\\n    pass\\n'):\n"
                "    l._compile(p, 'p')\n"
                "l.warm_up()\nprint('ok')\n") % SUPPORT_DIR
        out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True)
        self.assertEqual(out.stdout.strip(), "ok", out.stderr)


if __name__ == "__main__":
    unittest.main()
