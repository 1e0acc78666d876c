"""Run by each stateful kernel before its first cell (kernel/kernel.cc passes it as an item
of IPKernelApp.exec_lines), in a dict of its own so that no name reaches the user's namespace:

- `!cmd` and `%pip` use IPython's system_raw (subprocess; its output reaches the cell through
  ipykernel's fd capture) instead of system_piped, which needs a pseudo-terminal (pexpect)
  that the sandbox does not have ("out of pty devices"); ipykernel's own comment on
  system_piped names this switch;
- the user site (~/.local/lib/pythonX.Y/site-packages, where pip installs) is made and put on
  sys.path before the system's, as site.py does when it exists at start-up, so that a package
  installed by one cell imports in the next;
- setup.py of the kernel's setup files (kernel/kernel.h KernelSpec::setup_files), when there
  is one, is run.
"""
import os
import site
import sys

ip = get_ipython()  # noqa: F821 (given by the exec that runs this file)
ip.system = ip.system_raw
p = site.getusersitepackages()
os.makedirs(p, exist_ok=True)
at = [i for i, d in enumerate(sys.path) if d.endswith(("site-packages", "dist-packages"))]
if p not in sys.path:
    sys.path.insert(at[0] if at else len(sys.path), p)
s = "/tmp/.sandrun-kernel/setup.py"
if os.path.exists(s):
    with open(s) as f:
        code = compile(f.read(), s, "exec")
    exec(code, {"get_ipython": get_ipython, "__name__": "sandrun_kernel_setup"})  # noqa: F821
