"""Set-up of sandrun's IPython kernels, run once before the first cell.

The daemon writes this file as setup.py, with sitecustomize.py beside it, into the kernel's
private directory (/tmp/.sandrun-kernel: root's, readable by the kernel, src/kernel/kernel.h
KernelSpec::setup_files); the kernel's start-up line runs it with get_ipython in its globals.
It makes a kernel show what a program run shows, the same way:

- a pandas DataFrame or Series is a Markdown table (text/markdown, sitecustomize's
  markdown_table, the table of a program run), and the daemon shows a table once: not also
  as text in stdout;
- a cell that calls sys.exit() gets no "To exit: use 'exit'" warning: the daemon reports
  it as a program's exit (exit code 0 is ok), from the error IPython sends;
- a script written for `python3 main.py` finds what it looks for: sys.argv is
  ["/home/user/main.py"] (not ipykernel's, which argparse would refuse) and __file__ names
  the same path in the workspace;
- a print loop's output comes back in messages of about 1 MiB, not one message of all that
  was written in 0.2 s (over 16 MiB it was lost with the connection), so the output limit
  stops it;
- a figure saved with savefig as a raster file in the workspace is shown as that file, not
  drawn again (closed before the inline backend shows it);
- input() reads the run's stdin (the file `stdin` beside this one, when the run has stdin)
  and raises EOFError at its end, as `python3 main.py < stdin` does. ipykernel's input()
  asks a front end for a line, and sandrun has none (it raised StdinNotImplementedError).
"""

import builtins
import importlib.util
import os
import sys

_HERE = "/tmp/.sandrun-kernel"
_MAIN = "/home/user/main.py"


def _display_module():
    """sitecustomize.py beside this file, as a module of its own (it installs nothing without
    SANDRUN_OUTPUTS, which a kernel does not have)."""
    path = os.path.join(_HERE, "sitecustomize.py")
    if not os.path.exists(path):
        return None
    spec = importlib.util.spec_from_file_location("sandrun_display", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_DISPLAY = _display_module()


def _register_tables(ip):
    display = _DISPLAY
    if display is None:
        return
    table = display.markdown_table
    formatter = ip.display_formatter.formatters["text/markdown"]
    formatter.for_type_by_name("pandas.core.frame", "DataFrame", table)
    formatter.for_type_by_name("pandas.core.series", "Series", table)


def _open_stdin():
    try:
        return open(os.path.join(_HERE, "stdin"), encoding="utf-8", errors="replace")
    except OSError:
        return open(os.devnull, encoding="utf-8")


_stdin = _open_stdin()


def _input(prompt=""):
    """builtins.input as Python has it without a terminal: the prompt on stdout, a line of
    stdin without its newline, EOFError at the end."""
    if prompt:
        sys.stdout.write(str(prompt))
        sys.stdout.flush()
    line = _stdin.readline()
    if not line:
        raise EOFError("EOF when reading a line")
    return line[:-1] if line.endswith("\n") else line


def _client_stdin():
    """The cell came from a Jupyter client (sandrun's Jupyter API marks its execute_request):
    input() stays ipykernel's, which asks the client (allow_stdin) or raises
    StdinNotImplementedError."""
    try:
        parent = get_ipython().kernel.get_parent("shell")  # noqa: F821
        return parent.get("content", {}).get("sandrun_stdin") == "client"
    except Exception:
        return False


def _before_cell(info=None):
    # ipykernel sets builtins.input for each request (and restores it after): set ours after.
    if _client_stdin():
        return
    builtins.input = _input
    sys.stdin = _stdin


# A cell's output leaves the kernel in messages of at most about this much text: ipykernel
# sends what was written every 0.2 s as one message, and a print loop writes more than the
# daemon takes in one message (16 MiB: the connection is dropped and the output lost).
_FLUSH_CHARS = 1 << 20


def _bound_output_messages():
    try:
        from ipykernel.iostream import OutStream
    except ImportError:
        return
    write = OutStream.write

    def bounded_write(self, string):
        written = write(self, string)
        buffer = getattr(self, "_buffer", None)
        if buffer is not None and buffer.tell() >= _FLUSH_CHARS:
            self.flush()  # sends the buffer now, waiting for the I/O thread
        return written

    OutStream.write = bounded_write


# A figure the cell saved itself with savefig as a PNG/JPEG/GIF/WebP in the workspace is shown
# as that file (it is in the answer's files), not drawn again: as in a program run, once.
def _close_saved_figures():
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    for num in list(pyplot.get_fignums()):
        if getattr(pyplot.figure(num), "_sandrun_saved", False):
            pyplot.close(num)


def _patch_figure(module):
    original = module.Figure.savefig

    def savefig(self, fname, *args, **kwargs):
        result = original(self, fname, *args, **kwargs)
        self._sandrun_saved = _DISPLAY is not None and _DISPLAY.saved_raster(fname, kwargs) is not None
        return result

    module.Figure.savefig = savefig


def _patch_inline(module):
    original = module.show

    def show(*args, **kwargs):
        _close_saved_figures()
        return original(*args, **kwargs)

    # The module keeps its state on its show function (show._to_draw, show._draw_called),
    # read through the module's global: the wrapper has the same attributes, not a copy.
    show.__dict__ = original.__dict__
    module.show = show


_PATCHES = {"matplotlib.figure": _patch_figure, "matplotlib_inline.backend_inline": _patch_inline}


class _PatchOnImport:
    """A meta path finder that lets the normal finders find a module of _PATCHES and patches it
    once it has run, so that nothing of matplotlib is imported before the cell does."""

    def find_spec(self, name, path=None, target=None):
        patch = _PATCHES.get(name)
        if patch is None:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            patch(module)

        spec.loader.exec_module = exec_and_patch
        return spec


def _setup():
    import warnings

    ip = get_ipython()  # noqa: F821 (given by the start-up line)
    _register_tables(ip)
    _bound_output_messages()
    ip.events.register("pre_run_cell", _before_cell)
    # Before the inline backend's own post_execute (registered when pyplot is imported).
    ip.events.register("post_execute", _close_saved_figures)
    for name, patch in _PATCHES.items():
        if name in sys.modules:
            patch(sys.modules[name])
    sys.meta_path.insert(0, _PatchOnImport())
    warnings.filterwarnings("ignore", message="To exit: use 'exit', 'quit', or Ctrl-D.")
    sys.argv[:] = [_MAIN]
    ip.user_ns["__file__"] = _MAIN


_setup()
