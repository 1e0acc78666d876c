#!/usr/bin/env python3
"""The zygote beside bare spawns and today's sandrun (scripts/bench --zygote), in one invocation.

Starts two sandrun stacks with scripts/serve (temporary state directories, free ports):
  plain:  the default config (warm pool on, zygote off): "warm" runs are pool hits, "cold" runs
          have disk_mb 99, a shape the pool does not fit (bench.py COLD_DISK_MB);
  zygote: {"zygote": true, "pool": {}}: every print(1) starts from the zygote.
Then, interleaved round by round: latency of print(1) (bare `python3 -c`, warm, cold, zygote),
runs per second of print(1) at 1, 4 and 8 clients (bare spawns, plain, zygote), and the RSS of
each daemon and of the zygote. Prints a Markdown table; fails only on a wrong output.
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stack:
    def __init__(self, name, extra):
        self.name = name
        self.state = tempfile.mkdtemp(prefix=f"/tmp/sandrun-zb-{name}.")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        with open(os.path.join(self.state, "extra.json"), "w") as f:
            json.dump(extra, f)
        env = dict(os.environ, PORT=str(self.port), SANDRUN_SCRIPT_STATE_DIR=self.state,
                   SANDRUN_SCRIPT_SKIP_INSTALL="1", SANDRUN_SCRIPT_SKIP_BUILD="1",
                   SANDRUN_SCRIPT_CONFIG_EXTRA=os.path.join(self.state, "extra.json"))
        self.log = open(os.path.join(self.state, "serve.out"), "w")
        self.proc = subprocess.Popen([os.path.join(REPO, "scripts/serve")], env=env,
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)

    def wait(self, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise bench.BenchError(f"{self.name}: scripts/serve exited")
            time.sleep(0.5)
        else:
            raise bench.BenchError(f"{self.name}: /healthz did not answer")
        for _ in range(100):  # scripts/serve's example request
            with open(os.path.join(self.state, "serve.out")) as f:
                if "Press Ctrl-C to stop" in f.read():
                    return
            time.sleep(0.2)

    def rss_kb(self):
        daemon = bench.find_daemon(self.state)
        out = {"daemon": bench.daemon_rss_kb(daemon) if daemon else None, "zygote": None}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/cmdline", "rb") as f:
                        argv = f.read().split(b"\0")
                except OSError:
                    continue
                if len(argv) > 1 and argv[1] == f"{self.state}/runs/.zygote/sandrun_zygote.py".encode():
                    out["zygote"] = bench.daemon_rss_kb(int(entry))
        return out

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.state, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--load-requests", type=int, default=40)
    parser.add_argument("--clients", default="1,4,8")
    args = parser.parse_args()
    clients = [int(c) for c in args.clients.split(",")]
    stacks = [Stack("plain", {}), Stack("zygote", {"zygote": True, "pool": {}})]
    try:
        for s in stacks:
            s.wait()
        plain, zygote = stacks
        tmp = tempfile.mkdtemp()
        bare = bench.ProcessCase("print", "bare", [bench.PYTHON, "-c", "print(1)"], b"1\n", tmp)
        cases = {
            "bare `python3 -c 'print(1)'`": bare,
            "sandrun warm (pool hit)": bench.SandrunCase("print", bench.SandrunClient(plain.url),
                                                         "python", "print(1)", b"1\n"),
            "sandrun cold (no pool, no zygote)": bench.SandrunCase(
                "print", bench.SandrunClient(plain.url), "python", "print(1)", b"1\n", cold=True),
            "sandrun zygote": bench.SandrunCase("print", bench.SandrunClient(zygote.url),
                                                "python", "print(1)", b"1\n"),
        }
        samples = {k: [] for k in cases}
        for _ in range(args.runs + 2):
            for name, case in cases.items():
                if name.startswith("sandrun warm"):
                    bench.wait_pool_full(case.client)
                samples[name].append(case.run_once())
        print(f"Load average at start of the table: {bench.load_average()} (shared machine)\n")
        print("| print(1), sequential | median ms | p90 ms | × bare |")
        print("|---|---|---|---|")
        bare_med = statistics.median(samples["bare `python3 -c 'print(1)'`"][2:])
        for name, values in samples.items():
            v = values[2:]
            med = statistics.median(v)
            print(f"| {name} | {med:.1f} | {bench.percentile(v, 90):.1f} | {med / bare_med:.2f} |")
        print()
        print("| print(1), runs/s | " + " | ".join(f"{c} clients" for c in clients) + " |")
        print("|---|" + "---|" * len(clients))
        rates = {"bare spawns": {}, "sandrun today (pool on)": {}, "sandrun zygote": {}}
        for c in clients:
            jobs = {
                "bare spawns": lambda: bare.run_once,
                "sandrun today (pool on)": lambda: bench.SandrunCase(
                    "print", bench.SandrunClient(plain.url), "python", "print(1)", b"1\n").run_once,
                "sandrun zygote": lambda: bench.SandrunCase(
                    "print", bench.SandrunClient(zygote.url), "python", "print(1)", b"1\n").run_once,
            }
            for name, make in jobs.items():
                elapsed, _, error = bench.run_parallel(make, c, args.load_requests)
                if error:
                    raise error
                rates[name][c] = args.load_requests / elapsed
        for name, by in rates.items():
            cells = []
            for c in clients:
                cells.append(f"{by[c]:.1f} ({by[c] / rates['bare spawns'][c]:.2f}×)")
            print(f"| {name} | " + " | ".join(cells) + " |")
        print()
        for s in stacks:
            rss = s.rss_kb()
            print(f"RSS {s.name}: daemon {rss['daemon']} KiB, zygote {rss['zygote']} KiB")
        print(f"\nLoad average at the end: {bench.load_average()}")
    finally:
        for s in stacks:
            s.stop()


if __name__ == "__main__":
    try:
        main()
    except bench.BenchError as e:
        print(f"zygote bench: {e}", file=sys.stderr)
        sys.exit(1)
