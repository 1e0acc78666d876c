"""Runs a Python program as `python3 PROGRAM ARGS...` would, and shows its trailing expression.

    python3 /home/user/.sandrun/python/sandrun_main.py PROGRAM [ARGS...]

sandrun_main.py is a three-line script that imports this module and calls main(): a script is
compiled from source at every start, a module comes from its __pycache__ (the daemon places
bytecode built once at its start beside these files).

The program runs as __main__ with the sys.argv, sys.path[0], __file__, globals, tracebacks and
exit code that `python3 PROGRAM ARGS...` gives it (this file's frames are cut from tracebacks).
If its last statement is an expression whose value is not None, the value is shown as a
notebook shows a cell's result (sitecustomize.show_result: repr on stdout, a table, an image).
Figures still open at the end are shown too.

It keeps no state of its own between programs, so a warm process can import it and
call run(argv) for the one program it is handed.
"""

import os
import sys
import types

# This module and the script that calls it: their frames are cut from the program's tracebacks.
_OWN_FILES = (__file__, os.path.join(os.path.dirname(__file__), "sandrun_main.py"))

# Lines tried, from the end up, as the start of the last statement before the syntax tree
# decides (_split_trailing_expression).
_SPLIT_TRIES = 8
_SPLIT_MAX_BYTES = 64 * 1024
_UNSURE = object()


def _compile_with_tree(source, path):
    """_compile by the syntax tree: exact for every program, but its node types cost ~2 ms to
    make (_interpreter_compiler)."""
    import _ast

    tree = compile(source, path, "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)
    last = None
    if tree.body and isinstance(tree.body[-1], _ast.Expr):
        last = tree.body.pop()
    # The tree's own `from __future__` imports apply to it; the expression apart needs them
    # passed.
    body = compile(tree, path, "exec", dont_inherit=True)
    if last is None:
        return body, None
    flags = _future_flags_in(body, source)
    return body, compile(_ast.Expression(body=last.value), path, "eval", flags, dont_inherit=True)


def _lines_at_column_zero(source):
    """Byte offsets of the lines that begin with code in column 0 (not blank, not indented,
    not a comment), last first."""
    end = len(source)
    while end > 0:
        start = source.rfind(b"\n", 0, end - 1) + 1
        if source[start : start + 1] not in b" \t\n#":
            yield start
        end = start


def _future_flags_in(code, source):
    """The `from __future__` compiler flags `code` (compiled from `source`) was compiled with."""
    if b"__future__" not in source:
        return 0
    import __future__

    mask = 0
    for name in __future__.all_feature_names:
        mask |= getattr(__future__, name).compiler_flag
    return code.co_flags & mask


def _interpreter_compiler():
    """The interpreter's own Py_CompileString (C API, stable ABI), or None without _ctypes.

    The builtin compile() first makes the syntax tree's ~120 node types (3.11's
    builtin_compile calls PyAST_Check, which initialises them): ~8 million instructions, about
    2 ms, more than the rest of the loader. `python3 PROGRAM` compiles in C without them, and so
    does this. Without flags it compiles as compile(..., dont_inherit=True) does."""
    try:
        import _ctypes
    except ImportError:
        return None

    class _Object(_ctypes._SimpleCData):
        _type_ = "O"

    class _Bytes(_ctypes._SimpleCData):
        _type_ = "z"

    class _Int(_ctypes._SimpleCData):
        _type_ = "i"

    class _Function(_ctypes.CFuncPtr):
        # PYTHONAPI: called holding the GIL; a NULL result raises the exception it set.
        _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_PYTHONAPI
        _restype_ = _Object

    try:
        function = _Function(_ctypes.dlsym(_ctypes.dlopen(None), "Py_CompileString"))
    except (OSError, AttributeError):
        return None
    function.argtypes = (_Bytes, _Bytes, _Int)
    return function


_COMPILER = _interpreter_compiler()
_START_SYMBOLS = {"exec": 257, "eval": 258}  # Py_file_input, Py_eval_input (Include/compile.h)


def _compile_text(source, path, mode, flags=0):
    """compile(source, path, mode, flags, dont_inherit=True)."""
    if _COMPILER is None or flags or b"\0" in source:
        return compile(source, path, mode, flags, dont_inherit=True)
    return _COMPILER(source, os.fsencode(path), _START_SYMBOLS[mode])


def _try_compile(text, path, mode, flags=0):
    try:
        return _compile_text(text, path, mode, flags)
    except (SyntaxError, ValueError):
        return None


def _split_at(source, path, start, flags):
    """Splits `source` at `start`, the beginning of a line in column 0: (head code, expression
    code) when the tail is the last statement and an expression, None when it is the last
    statement and not an expression, _UNSURE when that cannot be told here, and False when
    the last statement does not begin there.

    When the head compiles on its own, it ends where a statement may end (no bracket, string
    or continuation open), so the whole program's statements are the head's followed by the
    tail's. A tail that compiles in "eval" mode is one expression: then it is the last
    statement. The tail is padded with newlines so line numbers stay those of the program;
    `flags` are the program's `from __future__` flags."""
    head, tail = source[:start], source[start:]
    padding = b"\n" * head.count(b"\n")
    if _try_compile(padding + tail, path, "exec", flags) is None:
        return False
    head_code = _try_compile(head, path, "exec", flags)
    if head_code is None:
        return False
    last = _try_compile(padding + tail, path, "eval", flags)
    if last is not None:
        return head_code, last
    # A complete tail that is not one expression: one statement unless `;` joins several on
    # its line; an expression statement only if it has starred items (`*a, b`), which "eval"
    # takes only inside brackets.
    if b";" in tail:
        return _UNSURE
    if b"*" not in tail:
        return None
    if not padding:
        return _UNSURE
    last = _try_compile(padding[1:] + b"(\n" + tail + b"\n)", path, "eval", flags)
    return (head_code, last) if last is not None else None


def _split_trailing_expression(source, path, body):
    """(head code, trailing expression code), None when the program does not end with an
    expression statement, or _UNSURE; `body` is the whole `source` compiled."""
    if len(source) > _SPLIT_MAX_BYTES:
        return _UNSURE  # compiling it twice more would cost more than the tree
    if b"\r" in source or b"\f" in source or b"coding" in b"\n".join(source.split(b"\n", 2)[:2]):
        return _UNSURE  # other line ends, form feeds or an encoding: the tree decides
    import warnings

    flags = _future_flags_in(body, source)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the program's own compile has shown them
        for tries, start in enumerate(_lines_at_column_zero(source)):
            if tries == _SPLIT_TRIES:
                return _UNSURE
            split = _split_at(source, path, start, flags)
            if split is not False:
                return split
    return None  # no statement at all


def _compile(source, path):
    """The program's code and, when its last statement is an expression, that expression's
    code apart (evaluated after the rest so its value can be shown). Raises SyntaxError as
    `python3 PROGRAM` reports it."""
    body = _compile_text(source, path, "exec")
    split = _split_trailing_expression(source, path, body)
    if split is _UNSURE:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # shown by the compile above
            return _compile_with_tree(source, path)
    return (body, None) if split is None else split


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
