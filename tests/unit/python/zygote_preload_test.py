"""sandrun_zygote's preload (config zygote_preload): a module whose import fails, starts a
thread or leaves an fd open stops the zygote, naming it and why; modules that do none of that
are imported, and the run's MPLCONFIGDIR is given back. Each case runs _preload in a fresh
Debian python3 (it exits the process on a refusal), with test modules of its own.
"""

import os
import subprocess
import sys
import tempfile
import unittest

SUPPORT_DIR = os.environ.get("SANDRUN_PYTHON_DIR",
                             os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../src/python"))

MODULES = {
    "quiet_mod.py": "VALUE = 42\n",
    "thread_mod.py": "import threading, time\n"
                     "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n",
    "fd_mod.py": "import os\nKEPT = os.open('/dev/null', os.O_RDONLY)\n",
    "broken_mod.py": "raise RuntimeError('no such luck')\n",
}

PROBE = """
import os, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import sandrun_zygote
sandrun_zygote._preload(sys.argv[4:], sys.argv[3])
print(sorted(m for m in sys.modules if m.endswith('_mod')), os.environ.get('MPLCONFIGDIR'))
"""


class PreloadTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.mods = os.path.join(self.tmp.name, "mods")
        self.here = os.path.join(self.tmp.name, "zygote")
        os.makedirs(self.mods)
        os.makedirs(self.here)
        for name, text in MODULES.items():
            with open(os.path.join(self.mods, name), "w") as f:
                f.write(text)

    def tearDown(self):
        self.tmp.cleanup()

    def preload(self, *modules):
        env = dict(os.environ, MPLCONFIGDIR="/tmp/matplotlib", PYTHONDONTWRITEBYTECODE="1")
        return subprocess.run(
            [sys.executable, "-c", PROBE, SUPPORT_DIR, self.mods, self.here, *modules],
            capture_output=True, text=True, env=env, timeout=60, check=False)

    def test_quiet_modules_are_imported_and_the_run_environment_kept(self):
        got = self.preload("quiet_mod", "json")
        self.assertEqual(got.returncode, 0, got.stderr)
        self.assertEqual(got.stdout, "['quiet_mod'] /tmp/matplotlib\n")
        # matplotlib's directory during the preload was the zygote's own, root's only.
        self.assertEqual(os.stat(os.path.join(self.here, "matplotlib")).st_mode & 0o777, 0o700)

    def test_a_module_that_starts_a_thread_is_refused(self):
        got = self.preload("quiet_mod", "thread_mod")
        self.assertEqual(got.returncode, 1)
        self.assertIn("zygote_preload 'thread_mod': it started a thread", got.stderr)

    def test_a_module_that_leaves_an_fd_open_is_refused(self):
        got = self.preload("fd_mod")
        self.assertEqual(got.returncode, 1)
        self.assertIn("zygote_preload 'fd_mod': it left fds open", got.stderr)

    def test_a_module_whose_import_fails_is_refused(self):
        for name, why in (("broken_mod", "RuntimeError: no such luck"),
                          ("no_such_mod", "ModuleNotFoundError")):
            got = self.preload(name)
            self.assertEqual(got.returncode, 1, name)
            self.assertIn(f"zygote_preload {name!r}: its import failed: {why}", got.stderr)


if __name__ == "__main__":
    unittest.main()
