#!/usr/bin/python3
"""What a kernel costs (scripts/bench --kernels): prints Markdown tables on stdout.

1. A notebook run (a 2-cell markdown answer) through POST /run, its kernel from the kernel
   pool (the request as users send it) and a new one (limits.disk_mb 99: a kernel the pool does
   not serve), interleaved round by round.
2. Open WebUI's Code Interpreter call sequence against a Jupyter server, written for this
   bench after Open WebUI 0.10's execute_code_jupyter: POST /api/kernels?token=T, the
   WebSocket /api/kernels/<id>/channels?token=T with one execute_request of print(1) read
   until its idle status, DELETE /api/kernels/<id>; a new HTTP session for each call, as Open
   WebUI makes. And the time of one execute on a kept kernel (send to idle status). Against
   Debian's jupyter-server with ipykernel (unsandboxed, started here on 127.0.0.1 with a
   token), and against sandrun's /api/ when the server has it ("not available" otherwise):
   its calls spaced (the kernel pool refilled before each, off the clock, as calls come in a
   chat) and back to back. A second table splits each call into create, WebSocket handshake,
   execute and delete.

With --cold it also starts a second sandrun stack of its own with {"kernel_zygote": false}
(scripts/serve, as zygote_bench.py does) and measures there, in the same rounds, the new
kernel's notebook run and the back-to-back calls: kernels started without the kernel zygote.

Needs python3-aiohttp and python3-jupyter-server. Fails only on wrong output, never because
something is slow.
"""

import argparse
import asyncio
import http.client
import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid

import aiohttp

NOTEBOOK = "Two cells:\n\n```python\nx = 41\n```\n\nThen:\n\n```python\nprint(x + 1)\n```\n"


def log(*parts):
    print("kernel-bench:", *parts, file=sys.stderr, flush=True)


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def ms(seconds):
    value = seconds * 1000
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}"


class Sandrun:
    """POST /run and GET /healthz on one keep-alive connection."""

    def __init__(self, url, token):
        parsed = urllib.parse.urlsplit(url)
        self.host, self.port = parsed.hostname, parsed.port or 80
        self.token = token
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=120)

    def request(self, method, path, body=None):
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        for attempt in range(2):
            try:
                self.conn.request(method, path, body=body, headers=headers)
                response = self.conn.getresponse()
                return response.status, response.read()
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def kernel_pool(self):
        status, body = self.request("GET", "/healthz")
        if status != 200:
            return {}
        return json.loads(body).get("kernel_pool", {})

    def wait_pool_full(self, limit_s=30.0):
        """Waits until the kernel pool is full; whether it was (or there is no pool)."""
        deadline = time.monotonic() + limit_s
        while True:
            pool = self.kernel_pool()
            # Not filling yet (before the daemon's first kernel start): nothing to wait for.
            if not pool.get("active") or pool.get("ready", 0) >= pool.get("size", 0):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def notebook(self, disk_mb=None):
        request = {"markdown": NOTEBOOK, "user": "bench"}
        if disk_mb:
            request["limits"] = {"disk_mb": disk_mb}
        start = time.monotonic()
        status, body = self.request("POST", "/run", json.dumps(request))
        elapsed = time.monotonic() - start
        answer = json.loads(body)
        snippets = answer.get("snippets") or [{}]
        if status != 200 or snippets[-1].get("stdout") != "42\n":
            raise SystemExit(f"kernel-bench: wrong notebook answer ({status}): {body[:500]!r}")
        return elapsed


def bench_notebook(args):
    sandrun = Sandrun(args.url, args.token)
    pool = sandrun.kernel_pool()
    if not pool:
        raise SystemExit("kernel-bench: /healthz has no kernel_pool (a sandrun without it?)")
    cases = ("pooled", "fresh") + (("cold",) if args.cold_url else ())
    times = {case: [] for case in cases}
    cold = Sandrun(args.cold_url, args.token) if args.cold_url else None
    waited_out = 0
    hits_before = None
    for round_no in range(args.warmup + args.runs):
        for case in cases:
            # Before each run the pool is full, as before each bare run nothing else runs.
            if not sandrun.wait_pool_full() or (cold and not cold.wait_pool_full()):
                waited_out += 1
            if case == "pooled" and round_no == args.warmup and hits_before is None:
                hits_before = sandrun.kernel_pool().get("hits", 0)
            server = cold if case == "cold" else sandrun
            elapsed = server.notebook(disk_mb=None if case == "pooled" else 99)
            if round_no >= args.warmup:
                times[case].append(elapsed)
    hits = sandrun.kernel_pool().get("hits", 0) - (hits_before or 0)
    print(f"Notebook run (a 2-cell markdown answer, POST /run through nginx, HTTP end-to-end); "
          f"{args.warmup} warm-up + {args.runs} measured rounds, interleaved; kernel_pool_size "
          f"{pool.get('size')}:\n")
    print("| kernel | median ms | p90 ms | min ms | runs |")
    print("|---|--:|--:|--:|--:|")
    labels = {"pooled": "from the kernel pool",
              "fresh": "new (limits.disk_mb 99: not pooled), from the kernel zygote",
              "cold": "new (limits.disk_mb 99: not pooled), kernel_zygote off (second stack)"}
    for case in cases:
        t = times[case]
        print(f"| {labels[case]} | {ms(statistics.median(t))} | {ms(percentile(t, 90))} | "
              f"{ms(min(t))} | {len(t)} |")
    print(f"\nThe pool served {hits} of the {args.runs} measured pooled runs; before each run the "
          f"bench waited (up to 30 s) for the pool to be full again ({waited_out} waits ran out).\n")


# ---- the Jupyter call sequence -------------------------------------------------------------


def execute_request(code):
    msg_id = uuid.uuid4().hex
    message = {
        "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "bench",
                   "session": uuid.uuid4().hex, "date": "", "version": "5.3"},
        "parent_header": {}, "metadata": {},
        "content": {"code": code, "silent": False, "store_history": True,
                    "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
        "channel": "shell",
    }
    return msg_id, json.dumps(message)


async def execute(ws, code, timeout):
    """Sends one execute_request and reads until its idle status; returns stdout."""
    msg_id, text = execute_request(code)
    await ws.send_str(text)
    stdout = ""
    while True:
        frame = await asyncio.wait_for(ws.receive(), timeout)
        if frame.type != aiohttp.WSMsgType.TEXT:
            raise RuntimeError(f"the channels socket ended ({frame.type})")
        message = json.loads(frame.data)
        if message.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        kind = message.get("msg_type")
        content = message.get("content", {})
        if kind == "stream" and content.get("name") == "stdout":
            stdout += content.get("text", "")
        elif kind == "error":
            raise RuntimeError("\n".join(content.get("traceback", [])))
        elif kind == "status" and content.get("execution_state") == "idle":
            return stdout


async def one_call(base, token, code="print(1)", timeout=60, phases=None):
    """Open WebUI's sequence: a new session, create, execute over the WebSocket, delete.
    `phases` (a dict of lists, optional) gets the seconds of create, connect (the WebSocket
    handshake), execute and delete."""
    params = {"token": token} if token else {}
    marks = [time.monotonic()]
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{base}/api/kernels", params=params) as response:
            response.raise_for_status()
            kernel_id = (await response.json())["id"]
        marks.append(time.monotonic())
        try:
            ws_url = base.replace("http", "ws", 1) + f"/api/kernels/{kernel_id}/channels"
            async with session.ws_connect(ws_url, params=params) as ws:
                marks.append(time.monotonic())
                out = await execute(ws, code, timeout)
                marks.append(time.monotonic())
        finally:
            async with session.delete(f"{base}/api/kernels/{kernel_id}", params=params) as response:
                response.raise_for_status()
    marks.append(time.monotonic())
    if out != "1\n":
        raise RuntimeError(f"print(1) printed {out!r}")
    if phases is not None:
        for name, a, b in zip(("create", "connect", "execute", "delete"), marks, marks[1:]):
            phases.setdefault(name, []).append(b - a)


async def kept_kernel(base, token, runs, timeout=60):
    """Per-execute time on one kernel kept open (after one warm-up execute)."""
    params = {"token": token} if token else {}
    times = []
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{base}/api/kernels", params=params) as response:
            response.raise_for_status()
            kernel_id = (await response.json())["id"]
        try:
            ws_url = base.replace("http", "ws", 1) + f"/api/kernels/{kernel_id}/channels"
            async with session.ws_connect(ws_url, params=params) as ws:
                await execute(ws, "print(1)", timeout)
                for _ in range(runs):
                    start = time.monotonic()
                    out = await execute(ws, "print(1)", timeout)
                    times.append(time.monotonic() - start)
                    if out != "1\n":
                        raise RuntimeError(f"print(1) printed {out!r}")
        finally:
            async with session.delete(f"{base}/api/kernels/{kernel_id}", params=params) as response:
                response.raise_for_status()
    return times


async def measure_calls(base, token, warmup, runs, before_call=None):
    """Call times (and their phases) of `runs` calls after `warmup`; `before_call` (optional,
    blocking) runs before each, off the clock."""
    calls, phases = [], {}
    for i in range(warmup + runs):
        if before_call is not None:
            await asyncio.get_running_loop().run_in_executor(None, before_call)
        start = time.monotonic()
        await one_call(base, token, phases=phases if i >= warmup else None)
        if i >= warmup:
            calls.append(time.monotonic() - start)
    return calls, phases


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_jupyter_server():
    """Debian's jupyter-server with ipykernel on 127.0.0.1, a token, an empty root dir."""
    token = secrets.token_hex(16)
    port = free_port()
    root = tempfile.mkdtemp(prefix="kernel-bench-jupyter.")
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=root + "/runtime", JUPYTER_DATA_DIR=root + "/data",
               JUPYTER_CONFIG_DIR=root + "/config", IPYTHONDIR=root + "/ipython")
    log_file = open(root + "/server.log", "w")
    process = subprocess.Popen(
        [sys.executable, "-m", "jupyter_server", "--ip=127.0.0.1", f"--port={port}",
         "--no-browser", "--allow-root", f"--ServerApp.token={token}",
         f"--ServerApp.root_dir={root}", "--ServerApp.open_browser=False"],
        stdout=log_file, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"kernel-bench: jupyter-server exited; see {root}/server.log")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", f"/api/kernels?token={token}")
            if conn.getresponse().status == 200:
                return process, base, token, root
        except OSError:
            pass
        time.sleep(0.2)
    process.kill()
    raise SystemExit(f"kernel-bench: jupyter-server did not answer in 60 s; see {root}/server.log")


def stop_jupyter_server(process):
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def sandrun_has_jupyter_api(url, token):
    """Whether sandrun answers GET /api/kernels (the Jupyter server API) with a JSON list."""
    try:
        parsed = urllib.parse.urlsplit(url)
        conn = http.client.HTTPConnection(parsed.hostname, parsed.port or 80, timeout=10)
        query = "?" + urllib.parse.urlencode({"token": token}) if token else ""
        conn.request("GET", "/api/kernels" + query)
        response = conn.getresponse()
        body = response.read()
        return response.status == 200 and isinstance(json.loads(body), list)
    except (OSError, ValueError, http.client.HTTPException):
        return False


def bench_jupyter(args):
    rows = []  # (name, calls, phases, kept)
    process, base, token, root = start_jupyter_server()
    try:
        log(f"jupyter-server on {base}: {args.warmup} warm-up + {args.jupyter_runs} calls")
        calls, phases = asyncio.run(measure_calls(base, token, args.warmup, args.jupyter_runs))
        kept = asyncio.run(kept_kernel(base, token, args.kept_runs))
        rows.append(("Debian jupyter-server + ipykernel (unsandboxed), calls back to back",
                     calls, phases, kept))
    finally:
        stop_jupyter_server(process)
        subprocess.run(["rm", "-rf", "--", root], check=False)
    sandrun_rows = []
    if sandrun_has_jupyter_api(args.url, args.token):
        sandrun = Sandrun(args.url, args.token)
        pool = sandrun.kernel_pool()
        log(f"sandrun /api/ on {args.url}: calls spaced (the kernel pool refilled before each)")
        calls, phases = asyncio.run(measure_calls(args.url, args.token, args.warmup,
                                                  args.jupyter_runs, sandrun.wait_pool_full))
        kept = asyncio.run(kept_kernel(args.url, args.token, args.kept_runs))
        sandrun_rows.append((f"sandrun /api/ (sandboxed), kernel_pool_size {pool.get('size')}, "
                             f"calls spaced as in a chat (the pool refilled before each)",
                             calls, phases, kept))
        log(f"sandrun /api/ on {args.url}: calls back to back")
        calls, phases = asyncio.run(measure_calls(args.url, args.token, args.warmup,
                                                  args.jupyter_runs))
        sandrun_rows.append(("sandrun /api/ (sandboxed), calls back to back (the pool cannot "
                             "keep up: most kernels start on the call, from the kernel zygote)",
                             calls, phases, None))
    if args.cold_url and sandrun_has_jupyter_api(args.cold_url, args.token):
        log(f"sandrun /api/ on {args.cold_url} (kernel_zygote off): calls back to back")
        calls, phases = asyncio.run(measure_calls(args.cold_url, args.token, args.warmup,
                                                  args.jupyter_runs))
        sandrun_rows.append(("sandrun /api/ (sandboxed), calls back to back, kernel_zygote off "
                             "(second stack)", calls, phases, None))
    base_call = statistics.median(rows[0][1])
    base_exec = statistics.median(rows[0][3])
    print(f"Open WebUI's Code Interpreter sequence (POST /api/kernels, WebSocket execute_request "
          f"print(1) until idle, DELETE; a new HTTP session per call): {args.warmup} warm-up + "
          f"{args.jupyter_runs} calls one after the other; a kept kernel: {args.kept_runs} "
          f"executes of print(1) on one WebSocket, send to idle status:\n")
    print("| server | call median ms | call p90 ms | vs jupyter-server | execute on a kept kernel "
          "median ms | p90 ms | − jupyter-server ms |")
    print("|---|--:|--:|--:|--:|--:|--:|")
    for name, calls, _, kept in rows + sandrun_rows:
        call = statistics.median(calls)
        if kept:
            ex = statistics.median(kept)
            exec_cells = f"{ms(ex)} | {ms(percentile(kept, 90))} | {(ex - base_exec) * 1000:+.1f}"
        else:
            exec_cells = "– | – | –"
        print(f"| {name} | {ms(call)} | {ms(percentile(calls, 90))} | {call / base_call:.2f}× | "
              f"{exec_cells} |")
    if not sandrun_rows:
        print(f"| sandrun /api/ (sandboxed) | not available | – | – | not available | – | – |")
        print(f"\nsandrun at {args.url} does not serve the Jupyter server API (GET /api/kernels "
              f"answered no JSON list): its column is empty until a server with /api/ runs.")
    print("\nWhere a call's time goes (medians, ms):\n")
    print("| server | create | WebSocket handshake | execute | delete |")
    print("|---|--:|--:|--:|--:|")
    for name, _, phases, _ in rows + sandrun_rows:
        cells = " | ".join(ms(statistics.median(phases[p]))
                           for p in ("create", "connect", "execute", "delete"))
        print(f"| {name} | {cells} |")
    print()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="sandrun's nginx base URL")
    parser.add_argument("--token", default=os.environ.get("SANDRUN_TOKEN", ""))
    parser.add_argument("--runs", type=int, default=20, help="notebook rounds (default 20)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--jupyter-runs", type=int, default=20,
                        help="Open WebUI call sequences per server (default 20)")
    parser.add_argument("--kept-runs", type=int, default=50,
                        help="executes on a kept kernel (default 50)")
    parser.add_argument("--skip-jupyter", action="store_true")
    parser.add_argument("--cold", action="store_true",
                        help="also measure a stack of its own with kernel_zygote off")
    args = parser.parse_args()
    args.cold_url = None
    cold = None
    try:
        if args.cold:
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            import zygote_bench

            log("starting a second stack with kernel_zygote off")
            cold = zygote_bench.Stack("kcold", {"kernel_zygote": False})
            cold.wait()
            args.cold_url = cold.url
        bench_notebook(args)
        if not args.skip_jupyter:
            bench_jupyter(args)
    finally:
        if cold is not None:
            cold.stop()


if __name__ == "__main__":
    main()
