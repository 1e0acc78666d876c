"""The zygote (config `zygote`; DESIGN.md "zygote"): a Python started once, as a run's Python
starts, forked into each new sandbox.

    python3 <dir>/sandrun_zygote.py FD[,FD...] <module dir> <daemon pid> [--kernel] [MODULE...]

sandrund starts it with a run's environment (its PYTHONPATH names <dir>, which holds the support
files: site imports sitecustomize from there, as in a sandbox). Nothing here has random state
at import. It serves the daemon's requests on the first FD (_sandrun_zygote.serve: builds a
run's sandbox with the launcher's code), one at a time, and exits at the daemon's EOF; for each
further FD, a fork of it made once it has started serves that one, side by side. In the
sandbox it built, the program's process calls become(argv, environ), which runs as `python3
sandrun_main.py PROGRAM` does: what differs from a fresh interpreter is listed in DESIGN.md.
The MODULEs (config zygote_preload) are imported before it serves; one that fails, starts a
thread or leaves an fd open stops the zygote (runs then start cold).

With --kernel it is the kernel zygote (config kernel_zygote): it imports ipykernel (not its
debugger, debugpy) and goes on in each sandbox as `python3 -m ipykernel_launcher ARGS` does.
"""

import _signal
import os
import sys

import sandrun_loader


# What the kernel zygote imports: ipykernel's application, kernel and shell (IPython with
# them). Its debugger, debugpy, is not imported (its import runs `uname -p` and keeps the
# host's uname): ipykernel in a kernel from the zygote has no debugger (sandrun's Jupyter API
# never passed debug_request to a kernel anyway).
KERNEL_MODULES = ("ipykernel.kernelapp", "ipykernel.ipkernel", "ipykernel.zmqshell")


def _is_kernel(argv):
    return len(argv) > 2 and argv[1] == "-m"


def _run_path(environ):
    """The entries of the run's PYTHONPATH (the zygote's own is its directory)."""
    for entry in environ:
        if entry.startswith("PYTHONPATH="):
            return [p for p in entry[len("PYTHONPATH=") :].split(":") if p]
    return []


def _support_dir_inside(argv, environ, here):
    """Where the support files are in the sandbox: beside a run's sandrun_main.py, or for a
    kernel the PYTHONPATH entry that holds sitecustomize.py."""
    if not _is_kernel(argv):
        return os.path.dirname(argv[1]) if len(argv) > 1 else here
    found = [p for p in _run_path(environ) if os.path.exists(os.path.join(p, "sitecustomize.py"))]
    return found[0] if found else here


def _become_the_run(argv, environ, here):
    """In the sandbox: the run's argv, environ, paths, then the loader, or for a kernel
    (`python3 -m MODULE ARGS`) that module as __main__ (never returns)."""
    kernel = _is_kernel(argv)
    inside = _support_dir_inside(argv, environ, here)
    for name in ("sitecustomize", "sandrun_loader", "sandrun_zygote", "__main__"):
        module = sys.modules.get(name)
        origin = getattr(module, "__file__", None) or ""
        if origin.startswith(here + "/"):
            module.__file__ = inside + origin[len(here) :]
            module.__cached__ = None
            if getattr(module, "__spec__", None) is not None:
                module.__spec__.origin = module.__file__
    # The zygote's own directory (its script's and PYTHONPATH's entry), as sitecustomize takes
    # the support directory off in a sandbox; then the run's PYTHONPATH but that directory
    # (/home/user), where a fresh start puts it: before the standard library. The zygote never
    # had it (host root does not search a directory of the run's name on the host).
    # A kernel keeps the support directory (sitecustomize installs nothing without
    # SANDRUN_OUTPUTS, so does not take it off), and `-m` puts the working directory first.
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    run_path = _run_path(environ)
    sys.path[0:0] = [p for p in run_path if kernel or os.path.abspath(p) != inside]
    if kernel:
        sys.path.insert(0, os.getcwd())
    sys.modules.pop("_sandrun_zygote", None)
    sys.modules.pop("sandrun_zygote", None)
    sys.path_importer_cache.clear()
    os.environ.clear()
    for entry in environ:
        key, _, value = entry.partition("=")
        os.environ[key] = value
    # The user site as site computes it from HOME (the zygote's HOME was its own directory).
    import site as _site

    _site.USER_BASE = None
    _site.USER_SITE = None
    # What sitecustomize read of the environment at its import: the run's values.
    site = sys.modules.get("sitecustomize")
    if site is not None:
        site._OUTPUTS = os.environ.get("SANDRUN_OUTPUTS", "")
        site._MAX_FIGURES = site._int_env("SANDRUN_MAX_FIGURES", 20)
        site._MAX_DPI = site._int_env("SANDRUN_FIGURE_MAX_DPI", 150)
        site._MAX_PIXELS = site._int_env("SANDRUN_FIGURE_MAX_PIXELS", 4_000_000)
    _after_preload()
    sys.orig_argv[:] = argv
    sys.argv[:] = argv[2:] if kernel else argv[1:]
    _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)
    import importlib

    importlib.invalidate_caches()
    try:
        if kernel:
            import runpy

            runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
        else:
            sandrun_loader.run(argv[2:])
    except SystemExit as end:
        _exit(end.code)
    _exit(0)


def _preload(modules, here, kernel=False):
    """Imports config zygote_preload's modules (the kernel zygote: KERNEL_MODULES), with
    matplotlib's config and cache directory a private one of the zygote (the run's,
    /tmp/matplotlib, is a shared directory on the host). Refuses (exits) on a failed import, a
    thread (a fork copies only the forking thread) or a new open fd (it would reach into every
    sandbox)."""
    import importlib

    if kernel:
        sys.modules["debugpy"] = None  # ipykernel then has no debugger (KERNEL_MODULES)

    def fds():
        return sorted(os.listdir("/proc/self/fd"))

    before = fds()
    run_mpl = os.environ.get("MPLCONFIGDIR")
    own = os.path.join(here, "matplotlib")
    os.makedirs(own, mode=0o700, exist_ok=True)
    os.environ["MPLCONFIGDIR"] = own
    for name in modules:
        why = None
        try:
            importlib.import_module(name)
        except BaseException as e:  # noqa: BLE001 - any failure stops the zygote, said
            why = f"its import failed: {type(e).__name__}: {e}"
        _close_import_files()
        if why is None and len(os.listdir("/proc/self/task")) > 1:
            why = "it started a thread at its import (a fork copies only the forking thread)"
        if why is None and fds() != before:
            why = f"it left fds open at its import ({sorted(set(fds()) - set(before))})"
        if why is not None:
            what = "kernel zygote: import" if kernel else "zygote: zygote_preload"
            print(f"sandrun {what} {name!r}: {why}", file=sys.stderr, flush=True)
            os._exit(1)
    if kernel and sys.modules.get("debugpy", 0) is None:
        del sys.modules["debugpy"]  # a cell may import it
    if run_mpl is None:
        os.environ.pop("MPLCONFIGDIR", None)
    else:
        os.environ["MPLCONFIGDIR"] = run_mpl


def _close_import_files():
    """Files a module opens at its import and keeps: IPython.utils.io's devnull (the fd would
    be a host file's in every sandbox, and its number is one the sandbox's set-up reuses).
    Opened again in the run (_after_preload)."""
    io_utils = sys.modules.get("IPython.utils.io")
    devnull = getattr(io_utils, "devnull", None)
    if devnull is not None and not devnull.closed:
        devnull.close()


def _after_preload():
    """In the run, the preloaded modules' import-time state that must be the run's own: numpy's
    global generator (seeded from the OS at its import; random reseeds itself at a fork) gets a
    fresh seed, platform's cached uname (the host's name) is dropped, what the zygote closed
    (_close_import_files) is opened again, jedi's and parso's cache directories follow the
    run's environment, and matplotlib finds its config and cache directory again from the run's
    MPLCONFIGDIR."""
    platform = sys.modules.get("platform")
    if platform is not None:
        platform._uname_cache = None
    io_utils = sys.modules.get("IPython.utils.io")
    if getattr(io_utils, "devnull", None) is not None:
        io_utils.devnull = open(os.devnull, "w", encoding="utf-8")
    jedi_settings = sys.modules.get("jedi.settings")
    if jedi_settings is not None:
        cache = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
        jedi_settings.cache_directory = os.path.expanduser(os.path.join(cache, "jedi"))
    parso_cache = sys.modules.get("parso.cache")
    if parso_cache is not None:
        parso_cache._default_cache_path = parso_cache._get_default_cache_path()
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()
    mpl = sys.modules.get("matplotlib")
    if mpl is not None:
        # get_configdir and get_cachedir memoize their first answer in their closure.
        for func in (mpl.get_configdir, mpl.get_cachedir):
            names = func.__code__.co_freevars
            for name, cell in zip(names, func.__closure__ or ()):
                if name == "called":
                    cell.cell_contents = False
        style = sys.modules.get("matplotlib.style.core")
        config_dir = os.environ.get("MPLCONFIGDIR")
        if style is not None and config_dir:
            style.USER_LIBRARY_PATHS[:] = [os.path.join(config_dir, "stylelib")]


def _exit(code):
    """Ends the run as the interpreter's finalization would, except the teardown of what the
    zygote made: touching it would copy every page of it into this process (measured: 2/3 of a
    print(1) run's CPU). In order: the threads that are not daemons are waited for, the atexit
    functions run, the run's own modules (__main__ and those it imported) are let go so what
    they hold is closed (files flushed), a collection, the streams flushed, the exit status as
    Python gives it for SystemExit(code)."""
    import atexit
    import gc

    # As the interpreter's finalization: only when the run imported threading. The zygote has
    # not, and importing it here cost every print(1) run ~3 ms of CPU (scripts/bench --zygote).
    threading = sys.modules.get("threading")
    if threading is not None:
        threading._shutdown()
    atexit._run_exitfuncs()
    gc.collect()
    # What a finalization's teardown would flush: every open file of the run (the zygote's
    # own objects are frozen, not listed).
    import io

    for obj in gc.get_objects():
        if isinstance(obj, io.IOBase):
            try:
                if not obj.closed:
                    obj.flush()
            except Exception:
                pass
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code & 0xFF
    else:
        try:
            print(code, file=sys.stderr)
        except Exception:
            pass
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(status)


def _fork_servers(socks, zygote):
    """The socket this process serves: the first, or in a fork made for each further one (it
    shares the started Python's memory, and dies with this process)."""
    parent = os.getpid()
    for sock in socks[1:]:
        if os.fork() == 0:
            for other in socks:
                if other != sock:
                    os.close(other)
            zygote.watch_parent(parent)
            return sock
    for sock in socks[1:]:
        os.close(sock)
    return socks[0]


def _main():
    socks = [int(fd) for fd in sys.argv[1].split(",")]
    module_dir, daemon = sys.argv[2], int(sys.argv[3])
    sys.path.insert(0, module_dir)
    import _sandrun_zygote

    del sys.path[0]
    _sandrun_zygote.watch_parent(daemon)
    here = os.path.dirname(os.path.abspath(__file__))
    sandrun_loader.warm_up()
    if sys.argv[4:5] == ["--kernel"]:
        _preload(KERNEL_MODULES, here, kernel=True)
    elif len(sys.argv) > 4:
        _preload(sys.argv[4:], here)
    # Its children (each sandbox's init) are reaped by the kernel; the daemon watches them
    # through pidfds.
    _signal.signal(_signal.SIGCHLD, _signal.SIG_IGN)
    # Every object made so far into the collector's permanent generation: a collection in a
    # run then never walks (and writes to) them, so their pages stay shared with the zygote
    # instead of each being copied on its first write (gc.freeze, made for pre-fork servers).
    import gc

    gc.freeze()
    # The heap's free pages given back: every run's fork copies the page-table entries of
    # each page this process has, and its exit unmaps them (DESIGN.md, "Resident memory").
    _sandrun_zygote.trim()
    sock = _fork_servers(socks, _sandrun_zygote)
    os.write(sock, b"ready")  # the daemon waits for it (zygote.cc Zygote::Start)
    def become(argv, environ):
        _become_the_run(argv, environ, here)

    while _sandrun_zygote.serve(sock, become) is not False:
        pass


if __name__ == "__main__":
    _main()
