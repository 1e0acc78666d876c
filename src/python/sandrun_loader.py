"""Runs a Python program as `python3 PROGRAM ARGS...` would, and shows its trailing expression.

    python3 /home/user/.sandrun/python/sandrun_main.py PROGRAM [ARGS...]

sandrun_main.py is a three-line script that imports this module and calls main(): a script is
compiled from source at every start, a module comes from its __pycache__ (the daemon places
bytecode built once at its start beside these files; issue 11).

The program runs as __main__ with the sys.argv, sys.path[0], __file__, globals, tracebacks and
exit code that `python3 PROGRAM ARGS...` gives it (this file's frames are cut from tracebacks).
If its last statement is an expression whose value is not None, the value is shown as a
notebook shows a cell's result (sitecustomize.show_result: repr on stdout, a table, an image).
Figures still open at the end are shown too.

It keeps no state of its own between programs, so a warm process (issue 11) can import it and
call run(argv) for the one program it is handed.
"""

import _ast as ast  # the compiler's node types; the `ast` module costs ~3 ms to import
import os
import sys
import types

# This module and the script that calls it: their frames are cut from the program's tracebacks.
_OWN_FILES = (__file__, os.path.join(os.path.dirname(__file__), "sandrun_main.py"))


def _future_flags(tree):
    """Compiler flags of the module's `from __future__ import ...` statements."""
    flags = 0
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            import __future__

            for alias in node.names:
                feature = getattr(__future__, alias.name, None)
                if feature is not None:
                    flags |= feature.compiler_flag
    return flags


def _compile(source, path):
    """The program's code and, when its last statement is an expression, that expression's
    code apart (evaluated after the rest so its value can be shown). Raises SyntaxError as
    `python3 PROGRAM` reports it."""
    tree = compile(source, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body.pop()
    flags = _future_flags(tree)
    body = compile(tree, path, "exec", flags, dont_inherit=True)
    if last is None:
        return body, None
    expression = ast.Expression(body=last.value)
    return body, compile(expression, path, "eval", flags, dont_inherit=True)


def _main_module(path):
    from importlib.machinery import SourceFileLoader

    module = types.ModuleType("__main__")
    module.__file__ = path
    module.__cached__ = None
    module.__loader__ = SourceFileLoader("__main__", path)
    module.__spec__ = None
    module.__package__ = None
    module.__annotations__ = {}
    module.__builtins__ = sys.modules["builtins"]
    return module


def _user_traceback(tb):
    """`tb` without this loader's frames at its head."""
    while tb is not None and tb.tb_frame.f_code.co_filename in _OWN_FILES:
        tb = tb.tb_next
    return tb


def _show(value):
    site = sys.modules.get("sitecustomize")
    show = getattr(site, "show_result", None)
    if show is not None:
        show(value)
    elif value is not None:
        print(repr(value))


def _flush_figures():
    site = sys.modules.get("sitecustomize")
    flush = getattr(site, "flush_figures", None)
    if flush is not None:
        flush()


def run(argv):
    """Runs argv[0] with arguments argv[1:] as __main__; returns only by raising SystemExit."""
    path = argv[0]
    sys.argv[:] = argv
    # `python3 PROGRAM` puts the program's directory first on sys.path, where this file's
    # directory is now (unless sitecustomize took it away: it takes its own directory off).
    program_dir = os.path.dirname(os.path.abspath(path))
    if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
        sys.path[0] = program_dir
    else:
        sys.path.insert(0, program_dir)
    module = _main_module(path)
    sys.modules["__main__"] = module
    try:
        with open(path, "rb") as f:
            source = f.read()
        body, last = _compile(source, path)
        exec(body, module.__dict__)
        if last is not None:
            _show(eval(last, module.__dict__))
        _flush_figures()
    except SystemExit:
        raise
    except BaseException as error:
        tb = _user_traceback(error.__traceback__)
        error.__traceback__ = tb
        sys.excepthook(type(error), error, tb)
        if isinstance(error, KeyboardInterrupt):
            # As python3 does: end by SIGINT, so the parent sees the interrupt (exit 130 in a shell).
            import atexit
            import signal

            atexit._run_exitfuncs()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        raise SystemExit(1) from None
    raise SystemExit(0)


def warm_up():
    """Compiles a small program once: the compiler's first use in a process costs ~1.5 ms (its
    code paged in), which a waiting sandbox pays before its run. Keeps nothing."""
    _compile(b"x = 1\nx\n", "<warm-up>")


def main():
    """`sandrun_main.py PROGRAM [ARGS...]`: runs PROGRAM; returns only by raising SystemExit."""
    if len(sys.argv) < 2:
        sys.stderr.write("usage: sandrun_main.py PROGRAM [ARGS...]\n")
        raise SystemExit(2)
    run(sys.argv[1:])
