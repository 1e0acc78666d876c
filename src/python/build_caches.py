"""Run once at the daemon's start, in a sandbox, as a Python run (api/prepared_caches.cc):
prints one JSON object of what every fresh sandbox would otherwise rebuild.

"cache_tag", the interpreter's (PEP 3147: "cpython-311"), and "bytecode", {<support file
name>: <base64 of its .pyc>} (unchecked-hash .pyc, PEP 552: Python loads it without reading
the source; compiled with the path the runs see, so tracebacks name it); "font_cache",
{"name": <cache file name>, "content": <its text>}, when matplotlib is installed.
"""
import base64, json, os, py_compile, sys
here = os.path.dirname(os.path.abspath(sys.modules["sitecustomize"].__file__))
out = {"cache_tag": sys.implementation.cache_tag or "", "bytecode": {}}
if out["cache_tag"]:
    for name in sorted(os.listdir(here)):
        if name.endswith(".py"):
            cfile = "/tmp/sandrun-support.pyc"
            py_compile.compile(os.path.join(here, name), cfile=cfile, doraise=True,
                               invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
            with open(cfile, "rb") as f:
                out["bytecode"][name] = base64.b64encode(f.read()).decode()
try:
    import matplotlib
    import matplotlib.font_manager as fm
    path = os.path.join(matplotlib.get_cachedir(), "fontlist-v%s.json" % fm.FontManager.__version__)
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            out["font_cache"] = {"name": os.path.basename(path), "content": f.read()}
except ImportError:
    pass
print(json.dumps(out))
