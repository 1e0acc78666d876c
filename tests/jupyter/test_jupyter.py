"""sandrun's Jupyter server API through nginx, driven as Open WebUI's Code Interpreter drives a
Jupyter server (owui_jupyter.py), in token and password mode, plus hostile programs through the
WebSocket. One stack (scripts/serve, this build's daemon) for the whole file; the slow cases
(limits, a program that prints for seconds) run at the same time.

Run: SANDRUN_SOURCE_DIR=... SANDRUN_BUILD_DIR=... python3 -m unittest -v test_jupyter (root).
"""

import asyncio
import base64
import glob
import json
import os
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request

import aiohttp
import websockets

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "openwebui"))
from stack import Stack, free_loopback_port  # noqa: E402  (tests/openwebui/stack.py)

from owui_jupyter import execute_code_jupyter  # noqa: E402

WALL_S = 6  # the kernels' wall-time limit per execute
OUTPUT_BYTES = 64 << 10
MAX_FILES = 10


class JupyterStack(Stack):
    """The stack with two users' tokens (bound: a Jupyter client names no user), short limits
    and no warm pool (so every sandbox process on the host is a kernel's)."""

    def _write_config(self):
        self.token_b = self.token + "b"
        with open(os.path.join(self.state_dir, "tokens"), "w") as f:
            f.write(f"{self.token} user=alice\n{self.token_b} user=bob\n")
        config = {
            "sandbox_uid": self.sandbox_uid,
            "sandbox_gid": self.sandbox_uid,
            "cgroup_name": f"sandrun-jupyter-{self.port}",
            "allow_anonymous": False,
            "tokens_file": os.path.join(self.state_dir, "tokens"),
            "pool": {},
            "max_kernels": 8,
            "limits": {"wall_time_s": WALL_S, "cpu_time_s": WALL_S, "memory_mb": 256,
                       "processes": 64, "output_bytes": OUTPUT_BYTES,
                       "max_files": MAX_FILES, "file_size_mb": 1},
        }
        with open(os.path.join(self.state_dir, "test-config.json"), "w") as f:
            json.dump(config, f)

    # What of the kernels is on the host: their processes (the sandbox uid), mounts (their
    # tmpfs under the runs directory) and cgroups.
    def kernel_processes(self):
        pids = []
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/status") as f:
                    for line in f:
                        if line.startswith("Uid:") and int(line.split()[1]) == self.sandbox_uid:
                            if not self.in_kernel_pool(entry):
                                pids.append(int(entry))
            except (OSError, ValueError):
                continue
        return pids

    @staticmethod
    def in_kernel_pool(pid):
        # A kernel the pool booted ahead (cgroup pool-k-<hex>) waits for the next kernel
        # start by design; it is no kernel of a client's.
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                return "/pool-k-" in f.read()
        except OSError:
            return False

    def kernel_mounts(self):
        with open("/proc/self/mountinfo") as f:
            return [line for line in f if self.state_dir in line and "/k-" in line]

    def kernel_cgroups(self):
        return glob.glob(f"/sys/fs/cgroup/*/sandrun-jupyter-{self.port}/k-*")

    def host_state(self):
        return (self.kernel_processes(), self.kernel_mounts(), self.kernel_cgroups())


def http(method, url, headers=None, data=None):
    req = urllib.request.Request(url, method=method, headers=headers or {}, data=data)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class JupyterApi(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stack = JupyterStack.start()
        cls.url = cls.stack.base_url

    @classmethod
    def tearDownClass(cls):
        # A kernel left running ends with the daemon: nothing of it is left after the stop.
        status, body = http("POST", f"{cls.url}/api/kernels?token={cls.stack.token}")
        kept = cls.stack.host_state()
        cls.stack.stop()
        if status != 201 or not kept[0] or not kept[1]:
            raise AssertionError(f"a kernel to outlive the test did not start: {status} {body}")
        if any(cls.stack.host_state()):
            raise AssertionError(f"a kernel outlived the daemon: {cls.stack.host_state()}")

    def run_owui(self, code, **kw):
        kw.setdefault("token", self.stack.token)
        return asyncio.run(execute_code_jupyter(self.url, code, **kw))

    def assert_clean(self, what):
        deadline = time.monotonic() + 5
        while any(self.stack.host_state()) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(self.stack.host_state(), ([], [], []), what)

    def test_1_rest_endpoints_and_errors(self):
        t = self.stack.token
        status, body = http("GET", f"{self.url}/api")
        self.assertEqual(status, 200)
        self.assertIn("version", json.loads(body))
        status, body = http("GET", f"{self.url}/api/kernelspecs?token={t}")
        self.assertEqual(status, 200, body)
        specs = json.loads(body)
        self.assertEqual(specs["default"], "python3")
        self.assertEqual(specs["kernelspecs"]["python3"]["spec"]["display_name"],
                         "Python 3 (sandboxed)")
        for headers in ({}, {"Authorization": "token wrong"}):
            status, body = http("GET", f"{self.url}/api/kernels", headers)
            self.assertEqual(status, 401)
            self.assertEqual(set(json.loads(body)), {"message", "reason"})
        for auth in (f"token {t}", f"Bearer {t}"):
            status, body = http("GET", f"{self.url}/api/kernels", {"Authorization": auth})
            self.assertEqual((status, json.loads(body)), (200, []))
        status, body = http("GET", f"{self.url}/api/kernels/nope?token={t}")
        self.assertEqual(status, 404)
        self.assertIn("message", json.loads(body))
        status, body = http("POST", f"{self.url}/api/kernels?token={t}", data=b'{"name":"r"}')
        self.assertEqual(status, 400)
        self.assertIn("name", json.loads(body)["message"])
        status, body = http("POST", f"{self.url}/api/kernels?token={t}", data=b"[")
        self.assertEqual(status, 400)

    def test_2_open_webui_sequence_token_mode(self):
        cases = {
            "print": "print('hi')",
            "stderr": "import sys; print('oops', file=sys.stderr)",
            "value": "1+1",
            "figure": "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()",
            "error": "1/0",
            "table": "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})",
        }

        async def all_cases():
            return await asyncio.gather(*(execute_code_jupyter(
                self.url, code, token=self.stack.token, timeout=30) for code in cases.values()))

        out = dict(zip(cases, asyncio.run(all_cases())))
        self.assertEqual(out["print"].stdout, "hi")
        self.assertEqual(out["stderr"].stderr, "oops")
        self.assertEqual(out["value"].result, "2")
        self.assertIn("execute_result",
                      [m["msg_type"] for _, m in out["value"].messages])
        png = out["figure"].result
        self.assertTrue(png.startswith("data:image/png;base64,"), png[:80])
        self.assertTrue(base64.b64decode(png.split(",", 1)[1]).startswith(b"\x89PNG"))
        self.assertIn("display_data", [m["msg_type"] for _, m in out["figure"].messages])
        self.assertIn("ZeroDivisionError", out["error"].stderr)
        table = [m for _, m in out["table"].messages if m["msg_type"] == "execute_result"]
        self.assertEqual(len(table), 1)
        self.assertLessEqual({"text/plain", "text/html", "text/markdown"},
                             set(table[0]["content"]["data"]))
        for o in out.values():
            self.assertFalse(o.timed_out)
            self.assertEqual(o.messages[-1][1]["msg_type"], "status")
        self.assert_clean("a kernel outlived its DELETE")

    def test_3_password_mode(self):
        out = self.run_owui("x = 20\nprint(x + 22)", token="", password=self.stack.token)
        self.assertEqual(out.stdout, "42")
        self.assertEqual(out.stderr, "")
        # A cookie alone does not make a kernel: the X-XSRFToken header must match _xsrf.

        async def no_xsrf():
            # unsafe: keeps cookies of an IP address (127.0.0.1).
            async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as s:
                async with s.get(f"{self.url}/login") as r:
                    xsrf = r.cookies["_xsrf"].value
                async with s.post(f"{self.url}/login",
                                  data={"_xsrf": xsrf, "password": self.stack.token}) as r:
                    self.assertEqual(r.status, 200)
                async with s.post(f"{self.url}/api/kernels") as r:
                    self.assertEqual(r.status, 403)
                async with s.get(f"{self.url}/api/kernels") as r:
                    self.assertEqual(r.status, 200)
                async with s.post(f"{self.url}/login",
                                  data={"_xsrf": xsrf, "password": "wrong"}) as r:
                    self.assertEqual(r.status, 401)

        asyncio.run(no_xsrf())

    def test_4_other_users_kernel_is_refused(self):
        bob = self.stack.token_b

        async def as_bob(session, params, kernel_id):
            base = f"{self.url}/api/kernels"
            for method, path in (("GET", kernel_id), ("DELETE", kernel_id),
                                 ("POST", kernel_id + "/interrupt"),
                                 ("POST", kernel_id + "/restart")):
                status, body = http(method, f"{base}/{path}?token={bob}")
                self.assertEqual(status, 404, (method, path, body))
            status, body = http("GET", f"{base}?token={bob}")
            self.assertEqual(json.loads(body), [])
            ws = self.url.replace("http", "ws", 1)
            with self.assertRaises(websockets.exceptions.InvalidStatusCode) as refused:
                async with websockets.connect(f"{ws}/api/kernels/{kernel_id}/channels?token={bob}"):
                    pass
            self.assertEqual(refused.exception.status_code, 404)
            # Alice still sees hers, with her kernel's state.
            status, body = http("GET", f"{base}/{kernel_id}?token={self.stack.token}")
            self.assertEqual((status, json.loads(body)["execution_state"]), (200, "idle"))
            self.assertTrue(self.stack.kernel_processes(), "the kernel's processes are seen")
            self.assertTrue(self.stack.kernel_mounts(), "the kernel's tmpfs is seen")

        out = self.run_owui("v = 7\nprint(v)", before_delete=as_bob)
        self.assertEqual(out.stdout, "7")
        self.assert_clean("a kernel outlived its DELETE")

    def test_5_limits_streaming_and_hostile_programs(self):
        cases = {
            # Prints every second for ~5 s: each message comes as it is printed, so Open
            # WebUI's per-message timeout (3 s here) never fires.
            "ticks": ("import time\nfor i in range(5):\n    print(i, flush=True)\n"
                      "    time.sleep(1)\n", 3),
            "sleep": ("import time\ntime.sleep(120)", 30),
            # Ignores the interrupt: killed after the grace.
            "stubborn": ("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                         "while True: time.sleep(0.1)", 30),
            "memory": ("b = []\nwhile True: b.append('x' * (16 << 20))", 30),
            "flood": ("while True: print('x' * 1000)", 30),
        }

        async def all_cases():
            return await asyncio.gather(*(execute_code_jupyter(
                self.url, code, token=self.stack.token, timeout=timeout)
                for code, timeout in cases.values()))

        started = time.monotonic()
        out = dict(zip(cases, asyncio.run(all_cases())))
        # The fork bomb alone: its 64 spinning processes would starve the others' wall time.
        out["forkbomb"] = self.run_owui(
            "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass", timeout=30)
        elapsed = time.monotonic() - started
        self.assertLess(elapsed, 60)
        for name, o in out.items():
            self.assertFalse(o.timed_out, name)
            self.assertEqual(o.messages[-1][1]["content"], {"execution_state": "idle"}, name)
        ticks = out["ticks"]
        self.assertEqual(ticks.stdout.split(), ["0", "1", "2", "3", "4"])
        arrivals = [at for at, m in ticks.messages if m["msg_type"] == "stream"]
        self.assertGreater(arrivals[-1] - arrivals[0], 2.5, "output came at once, not as printed")
        self.assertIn("wall-clock time limit", out["sleep"].stderr)
        self.assertIn("KeyboardInterrupt", out["sleep"].stderr)
        self.assertIn("wall-clock time limit", out["stubborn"].stderr)
        self.assertIn("kernel was ended", out["stubborn"].stderr)
        self.assertEqual(out["stubborn"].stderr.count("sandrun: stopped"), 1)
        self.assertRegex(out["forkbomb"].stderr, "limit|Error")
        self.assertRegex(out["memory"].stderr, "memory limit|MemoryError")
        self.assertIn("output limit", out["flood"].stderr)
        self.assertLess(len(out["flood"].stdout), OUTPUT_BYTES + 1)
        self.assert_clean("the host is not clean after the hostile programs")


    def test_6_jupyter_server_as_a_gateway_client(self):
        """Debian's jupyter-server with --gateway-url: its own gateway client starts the kernel
        in sandrun and relays the channels; the cell's process is in sandrun's cgroup."""
        port = free_loopback_port()
        home = os.path.join(self.stack.state_dir, "jupyter-server")
        os.makedirs(home)
        env = dict(os.environ, HOME=home, JUPYTER_RUNTIME_DIR=home, JUPYTER_DATA_DIR=home,
                   JUPYTER_CONFIG_DIR=home)
        with open(os.path.join(home, "log"), "wb") as log:
            server = subprocess.Popen(
                ["/usr/bin/python3", "-m", "jupyter_server", "--allow-root", "--no-browser",
                 "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
                 "--ServerApp.token=gateway-test", f"--ServerApp.root_dir={home}",
                 f"--gateway-url={self.url}", f"--GatewayClient.auth_token={self.stack.token}"],
                stdout=log, stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL)
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 30
            while True:
                try:
                    if http("GET", f"{base}/api")[0] == 200:
                        break
                except OSError:  # not listening yet
                    pass
                self.assertIsNone(server.poll(), "jupyter-server exited")
                self.assertLess(time.monotonic(), deadline, "jupyter-server did not answer")
                time.sleep(0.1)
            pid, kernel_id = asyncio.run(self.cell_through_gateway(base))
            # The process that ran the cell: in sandrun's cgroup, as the sandbox user.
            found = []
            for host_pid in self.stack.kernel_processes():
                with open(f"/proc/{host_pid}/status") as f:
                    nspid = [line.split()[1:] for line in f if line.startswith("NSpid:")]
                with open(f"/proc/{host_pid}/cgroup") as f:
                    cgroup = f.read()
                if nspid and nspid[0][-1] == pid and f"sandrun-jupyter-{self.stack.port}/k-" in cgroup:
                    found.append(host_pid)
            self.assertEqual(len(found), 1, f"no sandboxed process of pid {pid} in its namespace")
            status, _ = http("DELETE", f"{base}/api/kernels/{kernel_id}?token=gateway-test")
            self.assertEqual(status, 204)
            self.assert_clean("the gateway's kernel outlived its DELETE")
        finally:
            server.terminate()
            server.wait(timeout=30)

    async def cell_through_gateway(self, base):
        """As JupyterLab does: a kernel, its channels, kernel_info until answered (jupyter-server
        drops a message sent before its own connection to the gateway is up), one cell."""
        async with aiohttp.ClientSession() as s:
            async with s.post(f"{base}/api/kernels?token=gateway-test", json={}) as r:
                self.assertEqual(r.status, 201, await r.text())
                kernel_id = (await r.json())["id"]
        ws_base = base.replace("http", "ws", 1)
        url = f"{ws_base}/api/kernels/{kernel_id}/channels?token=gateway-test"

        def request(msg_type, content):
            msg_id = os.urandom(8).hex()
            return msg_id, json.dumps({
                "header": {"msg_id": msg_id, "msg_type": msg_type, "session": "gateway-test",
                           "username": "test", "date": "", "version": "5.3"},
                "parent_header": {}, "metadata": {}, "content": content, "channel": "shell"})

        async with websockets.connect(url) as ws:
            for _ in range(20):
                info_id, text = request("kernel_info_request", {})
                await ws.send(text)
                try:
                    while True:
                        m = json.loads(await asyncio.wait_for(ws.recv(), 1))
                        if m["parent_header"].get("msg_id") == info_id and \
                                m["msg_type"] == "kernel_info_reply":
                            break
                    break
                except asyncio.TimeoutError:
                    continue
            exec_id, text = request("execute_request", {
                "code": "import os\nprint(os.getpid())", "silent": False, "store_history": True,
                "user_expressions": {}, "allow_stdin": False, "stop_on_error": True})
            await ws.send(text)
            stdout = ""
            while True:
                m = json.loads(await asyncio.wait_for(ws.recv(), 30))
                if m["parent_header"].get("msg_id") != exec_id:
                    continue
                if m["msg_type"] == "stream":
                    stdout += m["content"]["text"]
                if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                    break
        return stdout.strip(), kernel_id

    def test_7_files_get_links_and_are_the_sessions(self):
        """A file a cell writes: its link in the reply (what Open WebUI shows), downloadable
        through nginx; in the session "jupyter" for a /run and for the next kernel."""
        data = "city,n\nOslo,3\nLima,5\n"
        # A cache a library writes (fontconfig's, below XDG_CACHE_HOME=~/.cache, when matplotlib
        # draws to a file) is an ignored directory: not a line under the output.
        out = self.run_owui(f"with open('report.csv', 'w') as f:\n    f.write({data!r})\n"
                            "import os\nos.makedirs('.cache/fontconfig', exist_ok=True)\n"
                            "open('.cache/fontconfig/x.cache-8', 'w').write('x')\n"
                            "print('written')")
        self.assertEqual(out.stdout, "written")
        links = dict(line.split(": ", 1) for line in out.result.splitlines())
        self.assertEqual(list(links), ["report.csv"], out.result)
        status, body = http("GET", links["report.csv"])
        self.assertEqual((status, body.decode()), (200, data))
        shown = [m for _, m in out.messages if m["msg_type"] == "display_data"]
        self.assertEqual(len(shown), 1)
        self.assertIn(links["report.csv"], shown[0]["content"]["data"]["text/markdown"])
        self.assertIn("report.csv</a>", shown[0]["content"]["data"]["text/html"])
        # A cell that writes nothing shows no files.
        self.assertEqual(self.run_owui("print(len(open('report.csv').read()))").result, "")
        status, body = http("POST", f"{self.url}/run", {
            "Authorization": f"Bearer {self.stack.token}", "Content-Type": "application/json"},
            json.dumps({"language": "python", "session": "jupyter",
                        "code": "print(open('report.csv').read(), end='')"}).encode())
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["stdout"], data)
        # Another user's kernel has a session of its own.
        bob = self.run_owui("import os\nprint(os.path.exists('report.csv'))",
                            token=self.stack.token_b)
        self.assertEqual(bob.stdout, "False")

    def test_8_too_many_and_too_large_files_are_skipped_with_reasons(self):
        code = ("import os\nos.makedirs('many', exist_ok=True)\n"
                f"for i in range({MAX_FILES + 5}):\n"
                "    open(f'many/{i:02}.txt', 'w').write(str(i))\n"
                "open('evil\\n<b>report.csv: javascript:x', 'w').write('x')\n"
                "try:\n    open('huge.bin', 'wb').write(b'x' * (3 << 20))\n"
                "except OSError as e:\n    print('cut:', e.strerror)\n")
        out = self.run_owui(code)
        self.assertEqual(out.stdout, "cut: File too large", (out.stderr, out.result))
        self.assertEqual(out.messages[-1][1]["content"], {"execution_state": "idle"})
        lines = out.result.splitlines()
        self.assertIn("huge.bin: skipped (too_large)", lines)
        self.assertTrue(any(line.endswith(": skipped (too_many)") for line in lines), lines)
        published = [line for line in lines if ": http" in line]
        self.assertEqual(len(published), MAX_FILES, lines)
        html = [m for _, m in out.messages if m["msg_type"] == "display_data"][0]["content"]
        self.assertIn("evil?&lt;b&gt;report.csv", html["data"]["text/html"])
        self.assertNotIn("<b>", html["data"]["text/html"])
        self.assertIn("evil\\?\\<b\\>report\\.csv", html["data"]["text/markdown"])
        self.assertIn("evil?<b>report.csv: javascript:x: http", out.result)
        self.assertFalse(any(line.startswith("<b>report.csv") for line in lines), lines)

    def test_9_input_request_goes_to_the_client(self):
        """allow_stdin: input() asks the client (input_request on stdin) and takes its
        input_reply; without it, StdinNotImplementedError; a client that never answers is
        stopped at the wall limit."""
        t = self.stack.token
        status, body = http("POST", f"{self.url}/api/kernels?token={t}")
        self.assertEqual(status, 201, body)
        kernel_id = json.loads(body)["id"]
        ws_url = f"{self.url.replace('http', 'ws', 1)}/api/kernels/{kernel_id}/channels?token={t}"

        def message(channel, msg_type, content, parent=None):
            header = {"msg_id": os.urandom(8).hex(), "msg_type": msg_type, "session": "t",
                      "username": "t", "date": "", "version": "5.3"}
            return header, json.dumps({"header": header, "parent_header": parent or {},
                                       "metadata": {}, "content": content, "channel": channel})

        async def cell(ws, code, allow_stdin, answer=None):
            header, text = message("shell", "execute_request", {
                "code": code, "silent": False, "store_history": True, "user_expressions": {},
                "allow_stdin": allow_stdin, "stop_on_error": True})
            await ws.send(text)
            got = []
            while True:
                m = json.loads(await asyncio.wait_for(ws.recv(), WALL_S + 10))
                if m["parent_header"].get("msg_id") != header["msg_id"]:
                    continue
                got.append(m)
                if m["msg_type"] == "input_request" and answer is not None:
                    self.assertEqual(m["channel"], "stdin")
                    await ws.send(message("stdin", "input_reply", {"value": answer},
                                          m["header"])[1])
                if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                    return got

        def text_of(got, msg_type, key):
            return "".join(str(m["content"].get(key, "")) for m in got if m["msg_type"] == msg_type)

        async def queued_behind_a_failure(ws):
            # stop_on_error: what was queued when a cell failed is aborted, not run.
            texts = [message("shell", "execute_request", {"code": code, "allow_stdin": False})
                     for code in ("1/0", "print('never')")]
            for _, text in texts:
                await ws.send(text)
            second = texts[1][0]["msg_id"]
            got = []
            while True:
                m = json.loads(await asyncio.wait_for(ws.recv(), WALL_S + 10))
                if m["parent_header"].get("msg_id") == second:
                    got.append(m)
                    if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                        return got

        async def session():
            async with websockets.connect(ws_url) as ws:
                asked = await cell(ws, "name = input('who? ')\nprint('hi', name)", True, "ada")
                refused = await cell(ws, "input()", False)
                started = time.monotonic()
                unanswered = await cell(ws, "input('never answered')", True)
                waited = time.monotonic() - started
                aborted = await queued_behind_a_failure(ws)
                return asked, refused, unanswered, waited, aborted

        asked, refused, unanswered, waited, aborted = asyncio.run(session())
        self.assertEqual([m["content"]["status"] for m in aborted
                          if m["msg_type"] == "execute_reply"], ["aborted"])
        self.assertNotIn("stream", [m["msg_type"] for m in aborted])
        requests = [m for m in asked if m["msg_type"] == "input_request"]
        self.assertEqual([r["content"]["prompt"] for r in requests], ["who? "])
        self.assertEqual(text_of(asked, "stream", "text"), "hi ada\n")
        self.assertEqual(text_of(refused, "error", "ename"), "StdinNotImplementedError")
        self.assertIn("input_request", [m["msg_type"] for m in unanswered])
        self.assertIn("wall-clock time limit", text_of(unanswered, "stream", "text"))
        self.assertLess(waited, WALL_S + 5)
        status, _ = http("DELETE", f"{self.url}/api/kernels/{kernel_id}?token={t}")
        self.assertEqual(status, 204)


    def test_10_hostile_cases_on_kernels_from_the_kernel_zygote(self):
        """The hostile cases' Python programs that must NOT print something (a leaked
        secret, a syscall that worked, a network reached, memory past the limit, a sleep past
        the wall limit) run as Open WebUI cells, each on a new kernel from the kernel zygote:
        the call ends, the string is not in what the cell printed, and nothing of the
        kernel outlives its DELETE. The cases' own limits do not apply (a kernel has the
        stack's: 6 s, 256 MB); cases of a longer wall time (the socket floods) are left to
        integration.HostileCases."""
        path = os.path.join(os.environ["SANDRUN_SOURCE_DIR"], "tests/data/hostile_cases/runs.jsonl")
        with open(path) as f:
            cases = [json.loads(line) for line in f if line.strip()]
        chosen = [c for c in cases
                  if c["request"].get("language") == "python" and "code" in c["request"]
                  and "output_not_contains" in c["expect"]
                  and not c["request"].get("network") and not c["request"].get("stateful")
                  and c["request"].get("limits", {}).get("wall_time_s", 10) <= 10]
        self.assertGreaterEqual(len(chosen), 8, [c["name"] for c in chosen])
        for case in chosen:
            with self.subTest(case=case["name"]):
                out = self.run_owui(case["request"]["code"], timeout=WALL_S + 20)
                self.assertFalse(out.timed_out, case["name"])
                # What the program printed and its value: not stderr, where IPython's
                # traceback quotes the cell's source (the unreached print included).
                shown = out.stdout + out.result
                for text in case["expect"]["output_not_contains"]:
                    self.assertNotIn(text, shown, f"{case['name']}: {shown[:500]}")
                self.assert_clean(f"{case['name']}: the host is not clean after it")


if __name__ == "__main__":
    unittest.main()
