"""The local stack under test, for the Python tests: nginx in front of sandrund, started by
scripts/serve with SANDRUN_SKIP_INSTALL=1 SANDRUN_SKIP_BUILD=1 (the daemon of this build tree)
on a free loopback port, with a temporary state directory and a test config that requires a
bearer token. The Python twin of tests/integration/stack.{h,cc}.

    stack = Stack.start()      # waits for GET /healthz
    stack.base_url, stack.token
    stack.stop()               # SIGTERM to scripts/serve; checks nothing of the stack is left

Environment: SANDRUN_SOURCE_DIR and SANDRUN_BUILD_DIR (set by ctest), SANDRUN_KEEP_STATE=1 to
keep the state directory.
"""

import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

# Start-up includes the daemon's sandbox self-test.
HEALTH_TIMEOUT_S = 120
# scripts/serve gives sandrund 30 s after SIGTERM before SIGKILL.
STOP_TIMEOUT_S = 60
LINK_TTL_S = 600


def free_loopback_port() -> int:
    """A loopback TCP port that is free now (a race with another program is unlikely)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():
    # In the child before exec: SIGTERM when the test process dies (even by SIGKILL from a
    # ctest timeout), which scripts/serve turns into a clean stop of nginx and sandrund.
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Stack:
    def __init__(self, source_dir: str, build_dir: str):
        self.source_dir = source_dir
        self.build_dir = build_dir
        self.port = free_loopback_port()
        # An even uid of its own (and uid + 1) and a cgroup of its own, as the C++ fixture
        # does, so that concurrent stacks on one machine never share them.
        self.sandbox_uid = 110000 + 2 * (self.port % 10000)
        self.token = secrets.token_hex(16)
        # In /tmp (short: the FastCGI socket path must fit in sun_path) and mode 0755 so that
        # nginx's workers can run as www-data.
        self.state_dir = tempfile.mkdtemp(prefix="sandrun-owui.", dir="/tmp")
        os.chmod(self.state_dir, 0o755)
        self.process = None
        self.failed = False

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @classmethod
    def start(cls) -> "Stack":
        if os.geteuid() != 0:
            raise RuntimeError(
                "the Open WebUI plugin tests start sandrun's stack and must run as root "
                "(like scripts/serve and scripts/test)"
            )
        source = os.environ.get("SANDRUN_SOURCE_DIR") or os.path.abspath(
            os.path.join(os.path.dirname(__file__), "..", "..")
        )
        build = os.environ.get("SANDRUN_BUILD_DIR") or os.path.join(source, "build")
        stack = cls(source, build)
        try:
            stack._write_config()
            stack._start_serve()
            stack._wait_healthy()
        except BaseException:
            stack.failed = True
            stack.stop()
            raise
        return stack

    def _write_config(self):
        with open(os.path.join(self.state_dir, "tokens"), "w") as f:
            # Open WebUI names its users (X-Sandrun-User, `user`): a front end's token.
            f.write("# test token\n" + self.token + " front_end\n")
            # Open WebUI's Code Interpreter names no user (the Jupyter API): a bound token.
            f.write(self.token + "-bound user=openwebui\n")
        config = {
            "link_ttl_s": LINK_TTL_S,
            "sandbox_uid": self.sandbox_uid,
            "sandbox_gid": self.sandbox_uid,
            "cgroup_name": f"sandrun-owui-{self.port}",
            "max_concurrent_runs": 2,
            # A real deployment's setting: a bearer token is required.
            "allow_anonymous": False,
            "tokens_file": os.path.join(self.state_dir, "tokens"),
            "ceilings": {"wall_time_s": 60, "cpu_time_s": 60, "memory_mb": 2048},
        }
        with open(os.path.join(self.state_dir, "test-config.json"), "w") as f:
            json.dump(config, f)

    def _start_serve(self):
        env = {
            k: v
            for k, v in os.environ.items()
            if k
            not in (
                "PORT",
                "SANDRUN_STATE_DIR",
                "SANDRUN_SKIP_INSTALL",
                "SANDRUN_SKIP_BUILD",
                "SANDRUN_BUILD_DIR",
                "SANDRUN_CONFIG_EXTRA",
            )
        }
        env.update(
            PORT=str(self.port),
            SANDRUN_STATE_DIR=self.state_dir,
            SANDRUN_SKIP_INSTALL="1",
            SANDRUN_SKIP_BUILD="1",
            SANDRUN_BUILD_DIR=self.build_dir,
            SANDRUN_CONFIG_EXTRA=os.path.join(self.state_dir, "test-config.json"),
        )
        self.log = open(os.path.join(self.state_dir, "serve.log"), "wb")
        self.process = subprocess.Popen(
            ["/bin/bash", os.path.join(self.source_dir, "scripts", "serve")],
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # own process group for a last-resort kill
            preexec_fn=_die_with_parent,
        )

    def _wait_healthy(self):
        deadline = time.monotonic() + HEALTH_TIMEOUT_S
        last = "no answer"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"scripts/serve exited during start-up (status {self.process.returncode})\n"
                    + self.log_tails()
                )
            try:
                with urllib.request.urlopen(self.base_url + "/healthz", timeout=10) as r:
                    if r.status == 200:
                        return
            except urllib.error.HTTPError as e:
                last = f"{e.code} {e.read()[:300]!r}"
            except OSError as e:
                last = str(e)
            time.sleep(0.25)
        raise RuntimeError(
            f"GET /healthz did not answer 200 within {HEALTH_TIMEOUT_S} s (last: {last})\n"
            + self.log_tails()
        )

    def _stack_pids(self) -> list:
        """sandrund of this state directory and nginx processes naming its config."""
        config_arg = os.path.join(self.state_dir, "sandrun.jsonc")
        nginx_conf = os.path.join(self.state_dir, "nginx", "nginx.conf")
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    argv = f.read().decode("utf-8", "replace").split("\0")
            except OSError:
                continue
            joined = " ".join(argv)
            if (config_arg in argv and "--config" in argv) or nginx_conf in joined:
                pids.append(int(entry))
        return pids

    def stop(self):
        """Stops scripts/serve with SIGTERM and checks that nothing of the stack is left.
        Raises RuntimeError if it had to kill something."""
        problems = []
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                problems.append(f"scripts/serve did not stop within {STOP_TIMEOUT_S} s of SIGTERM")
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        # The kernel reaps nginx workers a moment after their master.
        deadline = time.monotonic() + 5
        left = self._stack_pids()
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = self._stack_pids()
        for pid in left:
            problems.append(f"process {pid} of the stack still ran after scripts/serve stopped")
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if getattr(self, "log", None):
            self.log.close()
        keep = self.failed or problems or os.environ.get("SANDRUN_KEEP_STATE") == "1"
        if keep:
            print(f"sandrun stack: kept {self.state_dir} for inspection\n" + self.log_tails())
        else:
            shutil.rmtree(self.state_dir, ignore_errors=True)
        if problems:
            raise RuntimeError("; ".join(problems))

    def log_tails(self, max_bytes: int = 4000) -> str:
        out = []
        for rel in ("serve.log", "logs/sandrund.log", "nginx/logs/error.log"):
            path = os.path.join(self.state_dir, rel)
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            text = data[-max_bytes:].decode("utf-8", "replace")
            out.append(f"----- {path} -----\n{text}")
        return "\n".join(out)
