"""sandrun's notebook display for every Python process of a run.

Python imports this module at start-up (site.py looks for `sitecustomize` on sys.path; the
sandbox's PYTHONPATH puts /home/user/.sandrun/python first). It must cost nothing to a program
that never plots, so it imports no third-party module; it only:

- puts `display(obj, ...)` among the builtins, as in IPython;
- watches for the import of matplotlib.pyplot and PIL.ImageShow and, when they are imported,
  makes plt.show(), Figure.show() and Image.show() save the image to the run's outputs area
  (SANDRUN_OUTPUTS, outside the workspace) as figure-N.png and list it in the display manifest;
  figures still open when the program ends are shown then (the notebook rule that makes
  `df.plot()` display); a figure the program saved itself with savefig as a PNG/JPEG/GIF/WebP
  inside the workspace is shown as that file instead of a second copy.

The manifest (outputs/displays.jsonl) has one JSON object per line, in the order shown:
  {"kind": "image", "mime": "image/png", "file": "figure-1.png"}
  {"kind": "image", "workspace_file": "chart.png"}
  {"kind": "table", "mime": "text/markdown", "text": "| a | b |..."}
  {"kind": "text", "mime": "text/markdown", "text": "..."}
  {"skipped": "figure-21.png", "reason": "too_many_figures"}
The daemon reads it after the run and trusts none of it (src/run/display_manifest.h).
"""

import builtins
import os
import sys

_OUTPUTS = os.environ.get("SANDRUN_OUTPUTS", "")
_WORKSPACES = ("/home/user/", "/mnt/data/")
_RASTER = (".png", ".jpg", ".jpeg", ".gif", ".webp")
_TABLE_ROWS = 30  # rows of a Markdown table; longer frames show their head and a count
_TABLE_COLUMNS = 20
_CELL_CHARS = 200
_HERE = os.path.dirname(os.path.abspath(__file__))


def _int_env(name, default):
    try:
        return max(1, int(os.environ.get(name, "")))
    except ValueError:
        return default


_MAX_FIGURES = _int_env("SANDRUN_MAX_FIGURES", 20)
_MAX_DPI = _int_env("SANDRUN_FIGURE_MAX_DPI", 150)
_MAX_PIXELS = _int_env("SANDRUN_FIGURE_MAX_PIXELS", 4_000_000)

# Figures shown by fig.show() (not shown again by plt.show() or at the end) and the paths
# figures were saved to, both keyed weakly so that closed figures go away.
_shown = None
_saved = None


def _write_entry(entry):
    if not _OUTPUTS:
        return
    import json

    line = (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8", "replace")
    # One write(2) per line with O_APPEND: the steps of a run (and subprocesses) share it.
    fd = os.open(os.path.join(_OUTPUTS, "displays.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


_next_figure = 1  # figure-N.png below this are taken (by this process or an earlier step)


def _reserve_image_name():
    """Returns (path, name) of the next free figure-N.png, or (None, name) past the cap."""
    global _next_figure
    while True:
        n = _next_figure
        _next_figure += 1
        name = "figure-%d.png" % n
        path = os.path.join(_OUTPUTS, name)
        try:
            # O_EXCL: the steps of a run (and subprocesses) share the outputs area, and each
            # number is taken once, also past the cap (an empty file that is never published).
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except FileExistsError:
            continue
        if n > _MAX_FIGURES:
            _write_entry({"skipped": name, "reason": "too_many_figures"})
            return None, name
        return path, name


def _show_png(write):
    """Shows an image: `write(path)` writes the PNG to path."""
    if not _OUTPUTS:
        return
    path, name = _reserve_image_name()
    if path is None:
        return
    write(path)
    _write_entry({"kind": "image", "mime": "image/png", "file": name})


def _workspace_path(fname):
    """The workspace-relative path of a file saved under /home/user or /mnt/data, else None."""
    try:
        path = os.path.realpath(os.fspath(fname))
    except TypeError:
        return None
    for root in _WORKSPACES:
        if path.startswith(root):
            rel = path[len(root) :]
            return rel if rel and not rel.startswith(".sandrun/") else None
    return None


# --- matplotlib ---------------------------------------------------------------------------


def _figure_dpi(fig):
    """The figure's own DPI, lowered to the configured caps (DPI and pixel count)."""
    dpi = min(float(fig.dpi), float(_MAX_DPI))
    width, height = fig.get_size_inches()
    pixels = width * height * dpi * dpi
    if pixels > _MAX_PIXELS:
        dpi = (float(_MAX_PIXELS) / (width * height)) ** 0.5
    return max(dpi, 1.0)


def show_figure(fig):
    """Shows one matplotlib figure: its saved file when it has one, else a new PNG."""
    saved = _saved.get(fig) if _saved is not None else None
    if saved is not None:
        _write_entry({"kind": "image", "workspace_file": saved})
        return
    # Figure's own savefig, not the recording wrapper: this file is ours, not the program's.
    # (A figure made without pyplot has the unwrapped savefig anyway.)
    save = _original_savefig or type(fig).savefig

    def write(path):
        save(fig, path, format="png", dpi=_figure_dpi(fig), bbox_inches="tight")

    _show_png(write)


def _open_figures():
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return []
    return [pyplot.figure(num) for num in pyplot.get_fignums()]


def flush_figures():
    """Shows every open figure not shown yet and closes them all (plt.show() and the end)."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    for fig in _open_figures():
        if fig not in _shown:
            show_figure(fig)
    pyplot.close("all")


def _plt_show(*args, **kwargs):
    flush_figures()


def _fig_show(self, warn=True):
    _shown[self] = True
    show_figure(self)


def saved_raster(fname, kwargs):
    """The workspace path a savefig(fname, **kwargs) wrote a PNG/JPEG/GIF/WebP to, else None
    (also used by the kernels' set-up, sandrun_kernel.py)."""
    rel = _workspace_path(fname) if isinstance(fname, (str, os.PathLike)) else None
    fmt = kwargs.get("format")
    if rel is None:
        return None
    raster = rel.lower().endswith(_RASTER) if fmt is None else str(fmt).lower() in ("png", "jpg", "jpeg", "gif", "webp")
    return rel if raster else None


def _savefig(self, fname, *args, **kwargs):
    result = _original_savefig(self, fname, *args, **kwargs)
    rel = saved_raster(fname, kwargs)
    if rel is not None:
        _saved[self] = rel
    else:
        _saved.pop(self, None)
    return result


_original_savefig = None


def _after_pyplot(pyplot):
    global _original_savefig, _shown, _saved
    import atexit
    import functools
    import weakref

    from matplotlib.figure import Figure

    _shown = weakref.WeakKeyDictionary()
    _saved = weakref.WeakKeyDictionary()
    _original_savefig = Figure.savefig
    Figure.savefig = functools.wraps(Figure.savefig)(_savefig)
    Figure.show = functools.wraps(Figure.show)(_fig_show)
    pyplot.show = functools.wraps(pyplot.show)(_plt_show)
    # Registered after pyplot's own atexit (which destroys all figures), so it runs before it.
    atexit.register(flush_figures)


def _is_figure(obj):
    figure = sys.modules.get("matplotlib.figure")
    return figure is not None and isinstance(obj, figure.Figure)


def _is_artist(obj):
    """A matplotlib artist (Axes, Line2D, Text, ...) or a list/tuple of them."""
    artist = sys.modules.get("matplotlib.artist")
    if artist is None:
        return False
    if isinstance(obj, (list, tuple)) and obj:
        return all(isinstance(o, artist.Artist) for o in obj)
    return isinstance(obj, artist.Artist)


# --- PIL --------------------------------------------------------------------------------------


def _is_pil_image(obj):
    image = sys.modules.get("PIL.Image")
    return image is not None and isinstance(obj, image.Image)


def show_pil_image(image):
    if image.mode not in ("1", "L", "LA", "P", "RGB", "RGBA", "I;16"):
        image = image.convert("RGBA" if "A" in image.mode else "RGB")
    _show_png(lambda path: image.save(path, format="PNG"))


def _after_imageshow(imageshow):
    class _SandrunViewer(imageshow.Viewer):
        def show(self, image, **options):
            show_pil_image(image)
            return 1

    imageshow.register(_SandrunViewer(), -1)  # first: before any desktop viewer


# --- pandas ---------------------------------------------------------------------------------


def _is_pandas(obj):
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(obj, (pandas.DataFrame, pandas.Series))


def _cell(value):
    if isinstance(value, float):
        text = "%.6g" % value
    else:
        text = str(value)
    text = text.replace("\r", " ").replace("\n", " ").replace("|", "\\|")
    return text if len(text) <= _CELL_CHARS else text[: _CELL_CHARS - 1] + "…"


def markdown_table(obj):
    """A DataFrame or Series as a GitHub-flavoured Markdown table (bounded in rows and columns)."""
    frame = obj.to_frame() if obj.ndim == 1 else obj
    rows, columns = frame.shape
    shown = frame.iloc[:_TABLE_ROWS, :_TABLE_COLUMNS]
    header = [_cell(frame.index.name or "")] + [_cell(c) for c in shown.columns]
    if columns > _TABLE_COLUMNS:
        header.append("…")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for index, row in zip(shown.index, shown.itertuples(index=False)):
        cells = [_cell(index)] + [_cell(v) for v in row]
        if columns > _TABLE_COLUMNS:
            cells.append("…")
        lines.append("| " + " | ".join(cells) + " |")
    if rows > _TABLE_ROWS or columns > _TABLE_COLUMNS:
        lines.append("")
        lines.append("%d rows × %d columns" % (rows, columns))
    return "\n".join(lines)


# --- display ----------------------------------------------------------------------------------


def show_value(value):
    """Shows one value as a notebook does: an image for figures and PIL images, a Markdown
    table for pandas objects (not also their text), repr on stdout in general."""
    if _is_figure(value):
        if _shown is not None:
            _shown[value] = True
        show_figure(value)
        return
    if _is_pil_image(value):
        show_pil_image(value)
        return
    png = getattr(value, "_repr_png_", None) if not isinstance(value, type) else None
    if callable(png):
        data = png()
        if isinstance(data, bytes):
            def write(path):
                with open(path, "wb") as f:
                    f.write(data)

            _show_png(write)
            return
    if _is_pandas(value) and _OUTPUTS:
        # Shown once: as the table, not also as text (an IPython kernel of sandrun likewise).
        _write_entry({"kind": "table", "mime": "text/markdown", "text": markdown_table(value)})
        return
    print(repr(value))
    markdown = getattr(value, "_repr_markdown_", None) if not isinstance(value, type) else None
    if callable(markdown):
        text = markdown()
        if isinstance(text, str):
            _write_entry({"kind": "text", "mime": "text/markdown", "text": text})


def show_result(value):
    """The trailing expression of a program: None and matplotlib artists show nothing (the
    figure they belong to is shown when the program ends)."""
    if value is None or _is_artist(value):
        return
    show_value(value)


def display(*objs, **kwargs):
    """IPython's display(): shows each object (show_value)."""
    for obj in objs:
        show_value(obj)


# --- import hooks -----------------------------------------------------------------------------


class _HookedLoader:
    def __init__(self, loader, hook):
        self._loader = loader
        self._hook = hook

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._hook(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _PostImportFinder:
    """Runs a hook right after a module is imported, without importing it early."""

    hooks = {"matplotlib.pyplot": _after_pyplot, "PIL.ImageShow": _after_imageshow}

    def find_spec(self, name, path=None, target=None):
        hook = self.hooks.get(name)
        if hook is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _HookedLoader(spec.loader, hook)
                return spec
        return None


def _lazy_importlib_submodules(importlib):
    """`importlib.util` and `importlib.machinery` import on first use after a bare `import
    importlib`. Debian's namespace-package .pth files imported both at every start, so such code
    ran; the sandbox's copies of those files import nothing (sandbox/mounts.h LeanNamespacePth)
    and this keeps it running."""
    if "__getattr__" in vars(importlib):
        return

    def __getattr__(name):
        if name in ("util", "machinery"):
            return __import__("importlib." + name, fromlist=["_"])
        raise AttributeError(f"module 'importlib' has no attribute {name!r}")

    importlib.__getattr__ = __getattr__


def _install():
    if not _OUTPUTS:
        return
    if "importlib" in sys.modules:
        _lazy_importlib_submodules(sys.modules["importlib"])
    else:
        _PostImportFinder.hooks["importlib"] = _lazy_importlib_submodules
    sys.meta_path.insert(0, _PostImportFinder())
    builtins.display = display
    # The program's sys.path is what `python3 main.py` gives: this directory was only needed
    # to find this module.
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]


_install()
