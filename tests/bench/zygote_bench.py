#!/usr/bin/env python3
"""The zygote beside bare spawns and today's sandrun (scripts/bench --zygote), in one invocation.

Starts three sandrun stacks with scripts/serve (temporary state directories, free ports):
  plain:   the default config (warm pool on, zygote off): "warm" runs are pool hits, "cold"
           runs have disk_mb 99, a shape the pool does not fit (bench.py COLD_DISK_MB);
  zygote:  {"zygote": true, "pool": {}}: every stateless Python run starts from the zygote;
  preload: the same with zygote_preload numpy, pandas, matplotlib.pyplot.
Then, interleaved round by round: latency of print(1) (bare `python3 -c`, warm, cold, zygote)
and of the matplotlib plot (bare, warm, zygote, zygote with preload); runs per second of
print(1) and of an `import pandas` program at 1, 4 and 8 clients (bare spawns, warm pool,
zygote, zygote with preload); the RSS of each daemon and of its zygote. Last, whether the
zygote's idea pays for Bash (bash_table): the CPU a started bash's forked subshell saves
against a fork + exec of `bash -c`, beside the machine's CPU per sandboxed Bash run. Prints
Markdown tables; fails only on a wrong output.
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


def pss_kb(pid):
    """Pss of `pid` in KiB (its private pages and its share of those it shares)."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    raise OSError(f"no Pss for {pid}")


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
        """The daemon's RSS; each zygote's memory as the sum of its processes' PSS (the run
        zygote serves from several processes that share its pages: RSS would count them
        once each), and how many processes that is."""
        daemon = bench.find_daemon(self.state)
        out = {"daemon": bench.daemon_rss_kb(daemon) if daemon else None, "zygote": None,
               "kernel_zygote": None, "zygote_processes": 0}
        script = f"{self.state}/runs/.zygote/sandrun_zygote.py".encode()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/cmdline", "rb") as f:
                        argv = f.read().split(b"\0")
                    if len(argv) < 2 or argv[1] != script or os.stat(f"/proc/{entry}").st_uid:
                        continue  # a run's program keeps the zygote's command line
                    pss = pss_kb(int(entry))
                except OSError:
                    continue
                # The kernel zygote (config kernel_zygote) runs the same script.
                key = "kernel_zygote" if b"--kernel" in argv else "zygote"
                out[key] = (out[key] or 0) + pss
                out["zygote_processes"] += key == "zygote"
        return out
    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.state, ignore_errors=True)


PANDAS_CODE = "import pandas as pd\nprint(len(pd.DataFrame({'a': [1, 2]})))\n"
PRELOAD = ["numpy", "pandas", "matplotlib.pyplot"]


QUIET_MAX_S = 1.0


def wait_quiet(settle):
    """Waits until the warm pool of `settle` is full again and then (at most QUIET_MAX_S) until
    nothing but this process is runnable on the machine (/proc/loadavg's runnable count) three
    polls in a row: a measured request then does not share the CPUs with what the one before
    it left behind (a pool's refill, a cold run's teardown after its response, a network
    namespace's cleanup), which would be charged to whichever case comes next."""
    bench.wait_pool_full(settle)
    deadline = time.monotonic() + QUIET_MAX_S
    quiet = 0
    while quiet < 3 and time.monotonic() < deadline:
        with open("/proc/loadavg") as f:
            runnable = int(f.read().split()[3].split("/")[0])
        quiet = quiet + 1 if runnable <= 1 else 0
        time.sleep(0.002)


def latency_table(title, cases, rounds, settle, warmup=2):
    """Interleaved rounds of `cases` (name -> Case), one after another; a Markdown table of
    median and p90 ms and the ratio to the first case (bare). Each case starts on a quiet
    machine (wait_quiet; `settle`: a client of the stack with a warm pool)."""
    samples = {k: [] for k in cases}
    for _ in range(rounds + warmup):
        for name, case in cases.items():
            wait_quiet(settle)
            samples[name].append(case.run_once())
    print(f"| {title}, sequential | median ms | p90 ms | × bare |")
    print("|---|---|---|---|")
    first = None
    for name, values in samples.items():
        v = values[warmup:]
        med = statistics.median(v)
        first = first or med
        print(f"| {name} | {med:.1f} | {bench.percentile(v, 90):.1f} | {med / first:.2f} |")
    print()


def machine_busy_s():
    """Busy CPU time of the whole machine so far (/proc/stat: all but idle and iowait), s."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def measure_cell(make, clients, requests, settle):
    """One cell of a rate table: `requests` runs of `make` (a factory of one-run callables) on
    `clients` threads, started on a quiet machine (wait_quiet). Returns the runs per second and
    the machine's busy CPU per run (ms)."""
    wait_quiet(settle)
    busy = machine_busy_s()
    elapsed, _, error = bench.run_parallel(make, clients, requests)
    if error:
        raise error
    return requests / elapsed, 1000 * (machine_busy_s() - busy) / requests


def rate_table(title, jobs, clients, requests, settle, rounds=1):
    """Runs per second of each of `jobs` (name -> a factory of one-run callables) at each
    number of clients, systems interleaved per client count, `rounds` times over; the median
    rate and the median of each round's ratio to the first (bare), with the rounds' range of
    that ratio when there are several (the machine is shared: bare spawns' rate moves by a
    quarter between minutes)."""
    rates = {name: {c: [] for c in clients} for name in jobs}
    for c in clients:
        for _ in range(rounds):
            for name, make in jobs.items():
                rates[name][c].append(measure_cell(make, c, requests, settle)[0])
    per_cell = f"{requests} runs per cell" + (f", median of {rounds} rounds" if rounds > 1 else "")
    print(f"| {title}, runs/s ({per_cell}) | "
          + " | ".join(f"{c} clients" for c in clients) + " |")
    print("|---|" + "---|" * len(clients))
    base = next(iter(rates.values()))
    for name, by in rates.items():
        cells = []
        for c in clients:
            ratios = sorted(r / b for r, b in zip(by[c], base[c]))
            cell = f"{statistics.median(by[c]):.1f} ({statistics.median(ratios):.2f}×"
            if rounds > 1:
                cell += f"; {ratios[0]:.2f}-{ratios[-1]:.2f}"
            cells.append(cell + ")")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()


def loop_cpu_ms(body, n):
    """CPU per iteration (ms, user + system, the loop's own share included) of one bash
    running `body` n times, its output to /dev/null: a fresh `bash -c` each time or a
    subshell forked from the started one."""
    before = os.times()
    subprocess.run(["/bin/bash", "-c", f"for ((i = 0; i < {n}; i++)); do {body}; done >/dev/null"],
                   check=True)
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system
                                                          - before.children_system)
    return 1000 * cpu / n


def bash_table(jobs, clients, requests, settle, loops):
    """Issue 30 item 4: would a bash zygote pay? What forking a started bash saves against a
    fork + exec of `bash -c 'echo 1'` (no sandbox; the most a bash zygote could save per run),
    beside runs/s and the machine's busy CPU per run of `jobs` (bare spawns first) at each
    number of clients."""
    spawned = statistics.median(loop_cpu_ms("/bin/bash -c 'echo 1'", loops) for _ in range(3))
    forked = statistics.median(loop_cpu_ms("( echo 1 )", loops) for _ in range(3))
    print(f"| bash `echo 1`, CPU per run, no sandbox ({loops} runs, median of 3) | ms |")
    print("|---|---|")
    print(f"| fork + exec of `bash -c 'echo 1'` | {spawned:.2f} |")
    print(f"| a subshell `( echo 1 )` forked from a started bash (a zygote's way) | {forked:.2f} |")
    print(f"| what a bash zygote could save per run, at most | {spawned - forked:.2f} |")
    print()
    print(f"| bash `echo 1` ({requests} runs per cell) | "
          + " | ".join(f"{c} clients: runs/s (× bare), machine CPU ms per run" for c in clients)
          + " |")
    print("|---|" + "---|" * len(clients))
    cells = {name: [] for name in jobs}
    base = {}
    for c in clients:
        for name, make in jobs.items():
            rate, cpu_ms = measure_cell(make, c, requests, settle)
            base.setdefault(c, rate)
            cells[name].append(f"{rate:.1f} ({rate / base[c]:.2f}×), {cpu_ms:.1f}")
    for name, row in cells.items():
        print(f"| {name} | " + " | ".join(row) + " |")
    print()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--load-requests", type=int, default=40)
    parser.add_argument("--clients", default="1,4,8")
    parser.add_argument("--rate-rounds", type=int, default=3)
    args = parser.parse_args()
    clients = [int(c) for c in args.clients.split(",")]
    stacks = [Stack("plain", {}), Stack("zygote", {"zygote": True, "pool": {}}),
              Stack("preload", {"zygote": True, "pool": {}, "zygote_preload": PRELOAD})]
    try:
        for s in stacks:
            s.wait()
        plain, zygote, preload = stacks
        tmp = tempfile.mkdtemp()
        settle = bench.SandrunClient(plain.url)  # the one stack with a warm pool
        print(f"Load average at the start: {bench.load_average()} (shared machine)\n")

        def sandrun(stack, code, expected, cold=False, files=()):
            return bench.SandrunCase("x", bench.SandrunClient(stack.url), "python", code,
                                     expected, files=files, cold=cold)

        def bare(code, expected):
            return bench.ProcessCase("x", "bare", [bench.PYTHON, "-c", code], expected, tmp)

        latency_table("print(1)", {
            "bare `python3 -c 'print(1)'`": bare("print(1)", b"1\n"),
            "sandrun warm (pool hit)": sandrun(plain, "print(1)", b"1\n"),
            "sandrun cold (no pool, no zygote)": sandrun(plain, "print(1)", b"1\n", cold=True),
            "sandrun zygote (pool off)": sandrun(zygote, "print(1)", b"1\n"),
        }, args.runs, settle)
        plot = bench.PLOT_CODE
        latency_table("matplotlib plot to PNG", {
            "bare `python3 -c PLOT`": bare(plot, b"saved\n"),
            "sandrun warm (pool hit)": sandrun(plain, plot, b"saved\n", files=("plot.png",)),
            "sandrun zygote": sandrun(zygote, plot, b"saved\n", files=("plot.png",)),
            "sandrun zygote, preloaded numpy pandas matplotlib.pyplot": sandrun(
                preload, plot, b"saved\n", files=("plot.png",)),
        }, max(5, args.runs // 3), settle, warmup=1)
        systems = (("bare spawns", None), ("sandrun warm pool (zygote off)", plain),
                   ("sandrun zygote (pool off)", zygote),
                   ("sandrun zygote + preload (pool off)", preload))
        for title, code, expected, requests, rounds in (
                # 4× --load-requests: at 100 runs/s, 48 runs are half a second, of which the
                # clients' start and the last runs' tail are a large part.
                ("print(1)", "print(1)", b"1\n", 4 * args.load_requests, args.rate_rounds),
                ("`import pandas`", PANDAS_CODE, b"2\n", max(8, args.load_requests // 4), 1)):
            jobs = {}
            for name, stack in systems:
                if stack is None:
                    jobs[name] = lambda code=code, expected=expected: bare(code, expected).run_once
                else:
                    jobs[name] = (lambda stack=stack, code=code, expected=expected:
                                  sandrun(stack, code, expected).run_once)
            rate_table(title, jobs, clients, requests, settle, rounds)

        def bash_bare():
            return bench.ProcessCase("x", "bare", ["/bin/bash", "-c", "echo 1"], b"1\n",
                                     tmp).run_once

        def bash_sandrun(stack):
            return lambda: bench.SandrunCase("x", bench.SandrunClient(stack.url), "bash",
                                             "echo 1", b"1\n").run_once
        bash_table({"bare spawns": bash_bare,
                    "sandrun default config (a bash pool of 1)": bash_sandrun(plain),
                    "sandrun without a pool (the zygote stack: every bash run cold)": bash_sandrun(zygote)},
                   clients, 4 * args.load_requests, settle, 10 * args.load_requests)
        print("| memory (KiB) | daemon RSS | zygote PSS (processes) "
              "| kernel zygote PSS (kernel_zygote) | together |")
        print("|---|---|---|---|---|")
        for s in stacks:
            rss = s.rss_kb()
            parts = ("daemon", "zygote", "kernel_zygote")
            together = sum(rss.get(k) or 0 for k in parts)
            zygote = (f"{rss['zygote']} ({rss['zygote_processes']})" if rss["zygote"] else "-")
            print(f"| {s.name} | {rss['daemon'] or '-'} | {zygote} "
                  f"| {rss['kernel_zygote'] or '-'} | {together} |")
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
