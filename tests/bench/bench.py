#!/usr/bin/env python3
"""Start-up latency of one tiny program: bare, bwrap, gVisor (runsc do), sandrun over HTTP.

Run through scripts/bench, which installs the tools and starts a sandrun stack; this file only
measures and prints a Markdown report on stdout (progress on stderr). Python 3 standard library
only.

Every case runs the same program and must print the expected output, else the benchmark fails
(a fast wrong answer is not a result). Cases are interleaved round by round, so that a change
in the machine's load during the run hits all of them alike: WARMUP rounds are discarded, then
RUNS rounds are measured. Times are wall-clock from just before the launch to just after the
output has been read (subprocess: fork/exec + wait; HTTP: request sent + response parsed, on
one keep-alive connection).
"""

import argparse
import atexit
import datetime
import http.client
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

PYTHON = "/usr/bin/python3"
PROCESS_TIMEOUT_S = 20  # one local run; a hung sandbox is reported, not waited for
BASH = "/bin/bash"

# The same environment for every local case: nothing of the caller's (pyenv, PYTHON*) leaks in.
CLEAN_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
}

# A sandbox comparable to sandrun's (DESIGN.md §3): all namespaces (user, pid, mount, net, ipc,
# uts, cgroup), unprivileged uid inside, read-only /usr, fresh /proc and /dev, tmpfs /tmp and
# workspace, no capabilities, new session. bwrap adds no seccomp filter and no cgroup limits
# here (sandrun does both), so it is a lower bound for "namespaces + mounts".
BWRAP = [
    "bwrap", "--unshare-all", "--unshare-user", "--uid", "1000", "--gid", "1000",
    "--hostname", "sandbox", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
    "--ro-bind", "/usr", "/usr",
    "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
    "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
    "--ro-bind-try", "/etc/alternatives", "/etc/alternatives",
    "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
    "--ro-bind-try", "/etc/matplotlibrc", "/etc/matplotlibrc",
    "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
    "--tmpfs", "/home/user", "--chdir", "/home/user",
    "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/home/user",
    "--setenv", "LANG", "C.UTF-8",
    "--",
]

# gVisor: `runsc do` runs the command in a gVisor sandbox over a read-only view of the host's
# root with a tmpfs overlay. Flags found to work here (root, cgroup v1): see --runsc-flags.
DEFAULT_RUNSC_FLAGS = "--network=none --platform=ptrace"


class BenchError(Exception):
    """A failure; `short` is the one-line reason shown in the table for an n/a row."""

    def __init__(self, message, short=None):
        super().__init__(message)
        self.short = short or message.splitlines()[0]


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def percentile(values, p):
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * p // 100))  # ceil(n*p/100), at least 1
    return ordered[int(rank) - 1]


class Case:
    """One row: a name, a group (the program), and how to run it once."""

    def __init__(self, group, runner, describe):
        self.group = group
        self.runner = runner
        self.describe = describe
        self.samples = []
        self.warmup = 0  # rounds discarded first; set by main()
        self.max_samples = 0  # measured rounds; set by main()
        self.unavailable = None  # reason, when this case cannot run here
        self.short_reason = None  # its one-line form for the table

    def run_once(self):  # returns elapsed ms
        raise NotImplementedError


class ProcessCase(Case):
    def __init__(self, group, runner, argv, expected, cwd):
        super().__init__(group, runner, shlex.join(argv))
        self.argv = argv
        self.expected = expected
        self.cwd = cwd

    def run_once(self):
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=CLEAN_ENV, cwd=self.cwd,
                                  timeout=PROCESS_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise BenchError(f"{self.describe}: no exit within {PROCESS_TIMEOUT_S} s",
                             f"hangs (no exit within {PROCESS_TIMEOUT_S} s)")
        except OSError as e:
            raise BenchError(f"{self.describe}: cannot start: {e}", f"cannot start: {e}")
        elapsed = (time.perf_counter() - t0) * 1000.0
        if proc.returncode != 0 or proc.stdout != self.expected:
            err = proc.stderr.decode("utf-8", "replace").strip()
            last = err.splitlines()[-1] if err else "(no stderr)"
            raise BenchError(f"{self.describe}: exit {proc.returncode}, stdout "
                             f"{proc.stdout!r} (expected {self.expected!r}); stderr: {err[-2000:]}",
                             f"exit {proc.returncode}, stdout {proc.stdout!r}: {last[:200]}")
        return elapsed


class SandrunClient:
    """One keep-alive HTTP/1.1 connection to nginx; reconnects if the server closed it."""

    def __init__(self, url):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise BenchError(f"--url {url!r}: need http://host[:port][/prefix]")
        self.scheme = parsed.scheme
        self.host = parsed.hostname
        self.port = parsed.port
        self.prefix = parsed.path.rstrip("/")
        self.token = os.environ.get("SANDRUN_TOKEN")
        self.conn = None
        self.connects = 0

    def _connect(self):
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        self.conn = cls(self.host, self.port, timeout=60)
        self.conn.connect()
        self.connects += 1

    def request(self, method, path, body=None):
        """Returns (status, headers, body bytes, elapsed ms). Connecting is not timed."""
        headers = {"Content-Type": "application/json"} if body is not None else {}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        for attempt in (1, 2):
            if self.conn is None:
                try:
                    self._connect()
                except OSError as e:
                    raise BenchError(f"cannot connect to {self.host}:{self.port}: {e}")
            try:
                t0 = time.perf_counter()
                self.conn.request(method, self.prefix + path, body=body, headers=headers)
                resp = self.conn.getresponse()
                data = resp.read()
                elapsed = (time.perf_counter() - t0) * 1000.0
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
                    http.client.CannotSendRequest) as e:
                self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise BenchError(f"{method} {path}: connection failed twice: {e}")
                continue
            except OSError as e:
                raise BenchError(f"{method} {path} to {self.host}:{self.port}: {e}")
            if resp.getheader("Connection", "").lower() == "close":
                self.conn.close()
                self.conn = None
            return resp.status, resp, data, elapsed
        raise AssertionError("unreachable")


class SandrunCase(Case):
    """POST /run; the row's samples are end-to-end ms, `daemon` collects usage.wall_ms."""

    def __init__(self, group, client, language, code, expected, files=(), cold=False):
        # warm: the request as users send it, which a waiting sandbox of the pool serves when
        # one is ready; cold: the same with limits.disk_mb one below the default, a shape the
        # pool does not fit, so its sandbox is built for it (as with pool 0).
        kind = "cold" if cold else "warm"
        request = {"language": language, "code": code}
        if cold:
            request["limits"] = {"disk_mb": COLD_DISK_MB}
        super().__init__(group, f"sandrun {kind}, HTTP end-to-end",
                         f"POST /run {json.dumps(request)}")
        self.client = client
        self.body = json.dumps(request).encode()
        self.files = tuple(files)  # names the run must have published
        self.log_offsets = []  # the daemon log's size before each measured request
        self.request_ids = []  # nginx's X-Request-Id of each measured request
        self._last_request_id = None
        self.expected = expected.decode()
        self.daemon = Case(group, f"sandrun {kind}, daemon `usage.wall_ms`",
                           "the same requests: the daemon's own wall time (start to reap)")

    def run_once(self):
        status, resp, data, elapsed = self.client.request("POST", "/run", self.body)
        self._last_request_id = resp.getheader("X-Request-Id")
        try:
            doc = json.loads(data)
        except ValueError:
            doc = None
        if status != 200 or not isinstance(doc, dict):
            raise BenchError(f"{self.describe}: HTTP {status}: {data[:2000]!r}")
        if doc.get("status") != "ok" or doc.get("stdout") != self.expected:
            raise BenchError(f"{self.describe}: status {doc.get('status')!r}, stdout "
                             f"{doc.get('stdout')!r} (expected {self.expected!r}), stderr "
                             f"{str(doc.get('stderr'))[-2000:]!r}")
        published = {f.get("path") for f in doc.get("files") or [] if isinstance(f, dict)}
        for name in self.files:
            if name not in published:
                raise BenchError(f"{self.describe}: {name} not among the files {sorted(published)}")
        wall = (doc.get("usage") or {}).get("wall_ms")
        if not isinstance(wall, (int, float)):
            raise BenchError(f"{self.describe}: no usage.wall_ms in {data[:500]!r}")
        self._last_wall = float(wall)
        return elapsed


# disk_mb of the cold requests: one below the default (100), so the warm pool never serves them.
COLD_DISK_MB = 99


def pool_hits(client):
    """sandrun_pool_hits_total summed over languages, from /metrics (None if absent)."""
    status, _, data, _ = client.request("GET", "/metrics")
    if status != 200:
        return None
    total = None
    for line in data.decode(errors="replace").splitlines():
        if line.startswith("sandrun_pool_hits_total"):
            total = (total or 0) + int(float(line.rsplit(" ", 1)[1]))
    return total


# How long a latency round waits for the warm pool to be full before a sandrun request.
POOL_SETTLE_S = 3.0


def wait_pool_full(client):
    """Waits (at most POOL_SETTLE_S) until every language's warm pool is full again, so that a
    measured request does not share the CPUs with the refill the previous one started (bare
    and bwrap start on a quiet machine too; a cold request is sandrun with the pool off).
    Returns False when it was not full in time (the request is measured anyway)."""
    deadline = time.monotonic() + POOL_SETTLE_S
    while True:
        status, _, data, _ = client.request("GET", "/healthz")
        try:
            pools = json.loads(data).get("pool") or {} if status == 200 else {}
        except ValueError:
            pools = {}
        if all(p.get("ready", 0) >= p.get("size", 0) and not p.get("refilling")
               for p in pools.values()):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)


def probe(case):
    """Runs a case once; on failure marks it unavailable with the reason (first line)."""
    try:
        case.run_once()
    except BenchError as e:
        case.unavailable = str(e)
        case.short_reason = e.short


def fmt_ms(v):
    return f"{v:.1f}" if v < 100 else f"{v:.0f}"


def fmt_ratio(v):
    return f"{v:.1f}×" if v < 100 else f"{v:.0f}×"


def md_cell(text):
    return text.replace("|", "\\|").replace("\n", " ")


def load_average():
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def machine_facts():
    facts = {}
    facts["date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    facts["nproc"] = str(os.cpu_count())
    facts["kernel"] = platform.release()
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    facts["cpu"] = model or "unknown"
    try:
        with open("/etc/debian_version") as f:
            facts["debian"] = f.read().strip()
    except OSError:
        facts["debian"] = "unknown"
    facts["load"] = load_average()

    def version(argv):
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=20, env=CLEAN_ENV)
            return (out.stdout or out.stderr).strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError, IndexError):
            return "unknown"

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    facts["commit"] = version(["git", "-C", repo, "describe", "--always", "--dirty"])
    facts["python"] = version([PYTHON, "--version"])
    facts["bash"] = version([BASH, "--version"])
    facts["bwrap"] = version(["bwrap", "--version"])
    facts["runsc"] = version(["runsc", "--version"])
    return facts


PLOT_CODE = """import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig, ax = plt.subplots()
ax.plot([1, 2, 3, 4], [1, 4, 9, 16])
fig.savefig("plot.png")
print("saved")
"""
NUMPY_CODE = """import numpy as np
a = np.ones(20 * 1024 * 1024 // 8)
print(int(a.sum()))
"""
PROFILED = ("python3 `print(1)`", "bash `true`")  # the programs of the phase profile
SOAK_BYTES = 1 << 20  # output of one soak run
SOAK_CODE = f"import sys\n_ = sys.stdout.write('x' * {SOAK_BYTES})\n"  # '_ =': no trailing value shown


def daemon_rss_kb(pid):
    """VmRSS of `pid` in KiB, or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def find_daemon(state_dir):
    """The pid of the sandrund whose command line names a file in `state_dir`, or None."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == b"sandrund" and any(
                a.startswith(state_dir.encode() + b"/") for a in argv):
            return int(entry)
    return None


def read_phases(log_path, offset, request_id=None):
    """The phases_us objects of the POST /run lines of the daemon's log after `offset` (only
    the line of `request_id`, the X-Request-Id nginx gave the request, when given: the daemon
    logs a request after its response is sent, so the next request's line may come first)."""
    out = []
    try:
        with open(log_path, "rb") as f:
            f.seek(offset)
            for raw in f:
                try:
                    doc = json.loads(raw)
                except ValueError:
                    continue  # not a JSON line (an earlier daemon's text)
                if (isinstance(doc, dict) and doc.get("event") == "request"
                        and doc.get("path") == "/run" and doc.get("status") == 200
                        and isinstance(doc.get("phases_us"), dict)
                        and (request_id is None or doc.get("request_id") == request_id)):
                    out.append(doc["phases_us"])
    except OSError as e:
        raise BenchError(f"cannot read the daemon's log {log_path}: {e}")
    return out


def log_size(log_path):
    try:
        return os.path.getsize(log_path)
    except OSError:
        return 0


def phase_table(label, stamps):
    """Markdown rows: each phase's median duration since the previous stamp (ms)."""
    order = []
    for s in stamps:
        for name in s:
            if name not in order:
                order.append(name)
    rows = []
    prev_name = None
    for name in order:
        deltas = []
        for s in stamps:
            if name not in s:
                continue
            # The latest stamp before this one in this request.
            before = [v for k, v in s.items() if v <= s[name] and k != name]
            base = max(before) if before else 0
            deltas.append((s[name] - base) / 1000.0)
        if deltas:
            rows.append(f"| {label} | {prev_name or 'start'} → {name} | "
                        f"{statistics.median(deltas):.2f} | {percentile(deltas, 90):.2f} | "
                        f"{len(deltas)} |")
        prev_name = name
    return rows


def run_parallel(make_job, clients, count):
    """Runs `count` jobs on `clients` threads (each calls make_job(i) for a callable run by that
    thread). Returns (elapsed s, latencies ms, first error or None)."""
    lock = threading.Lock()
    state = {"next": 0, "error": None}
    latencies = []

    def worker():
        job = make_job()
        while True:
            with lock:
                if state["next"] >= count or state["error"] is not None:
                    return
                state["next"] += 1
            try:
                ms = job()
            except Exception as e:  # noqa: BLE001 -- reported by the main thread
                err = e if isinstance(e, BenchError) else BenchError(f"{type(e).__name__}: {e}")
                with lock:
                    state["error"] = state["error"] or err
                return
            with lock:
                latencies.append(ms)

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, latencies, state["error"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True, help="sandrun base URL (nginx), e.g. http://127.0.0.1:8080")
    ap.add_argument("--runs", type=int, default=30, help="measured rounds (default 30)")
    ap.add_argument("--warmup", type=int, default=3, help="discarded rounds first (default 3)")
    ap.add_argument("--heavy-runs", type=int, default=16,
                    help="measured rounds of the plot and numpy programs (default 16)")
    ap.add_argument("--load-requests", type=int, default=48,
                    help="requests per client count and runner in each throughput round "
                         "(default 48)")
    ap.add_argument("--load-rounds", type=int, default=3,
                    help="throughput rounds, runners alternating (default 3)")
    ap.add_argument("--soak-runs", type=int, default=500,
                    help="runs with 1 MiB of output from 8 clients (default 500; 0: no soak)")
    ap.add_argument("--daemon-pid", type=int, default=0, help="sandrund's pid, for its RSS")
    ap.add_argument("--daemon-state", default="", help="find sandrund by its state directory")
    ap.add_argument("--daemon-log", default="", help="sandrund's log, for the phase profile")
    ap.add_argument("--profile", action="store_true",
                    help="only the phase profile of sequential runs (needs --daemon-log)")
    ap.add_argument("--runsc-flags", default=DEFAULT_RUNSC_FLAGS,
                    help=f"global runsc flags before `do` (default {DEFAULT_RUNSC_FLAGS!r})")
    ap.add_argument("--max-seconds", type=float, default=300,
                    help="fail if measuring takes longer than this (default 300)")
    args = ap.parse_args()
    if args.runs < 1 or args.warmup < 0 or args.heavy_runs < 1:
        raise BenchError("--runs and --heavy-runs must be >= 1 and --warmup >= 0")
    if args.load_requests < 8 or args.load_rounds < 1 or args.soak_runs < 0:
        raise BenchError("--load-requests must be >= 8, --load-rounds >= 1, --soak-runs >= 0")
    if args.profile and not args.daemon_log:
        raise BenchError("--profile needs --daemon-log (the daemon's JSON log lines)")

    client = SandrunClient(args.url)
    status, _, data, _ = client.request("GET", "/healthz")
    if status != 200:
        raise BenchError(f"GET {args.url}/healthz: HTTP {status}: {data[:500]!r}")
    daemon_pid = args.daemon_pid or (find_daemon(args.daemon_state) if args.daemon_state else 0)

    workdir = tempfile.mkdtemp(prefix="sandrun-bench-")
    atexit.register(shutil.rmtree, workdir, ignore_errors=True)
    runsc_base = ["runsc", *shlex.split(args.runsc_flags), "do", "--cwd", "/tmp"]

    programs = [
        # group label, local argv tail, sandrun language, code, expected stdout, heavy, files
        ("python3 `print(1)`", [PYTHON, "-c", "print(1)"], "python", "print(1)", b"1\n",
         False, ()),
        ("bash `echo 1`", [BASH, "-c", "echo 1"], "bash", "echo 1", b"1\n", False, ()),
        ("bash `true`", [BASH, "-c", "true"], "bash", "true", b"", False, ()),
        ("python3 matplotlib plot to PNG", [PYTHON, "-c", PLOT_CODE], "python", PLOT_CODE,
         b"saved\n", True, ("plot.png",)),
        ("python3 numpy 20 MB array", [PYTHON, "-c", NUMPY_CODE], "python", NUMPY_CODE,
         b"2621440\n", True, ()),
    ]
    if args.profile:
        programs = programs[:3]
    groups = []
    for label, argv, language, code, expected, heavy, files in programs:
        bare = ProcessCase(label, "bare", argv, expected, workdir)
        bwrap = ProcessCase(label, "bwrap", BWRAP + argv, expected, workdir)
        runsc = ProcessCase(label, "gVisor `runsc do`", runsc_base + argv, expected, workdir)
        sandrun = SandrunCase(label, client, language, code, expected, files)
        cold = SandrunCase(label, client, language, code, expected, files, cold=True)
        for case in (bare, bwrap, runsc, sandrun, cold):
            case.warmup = 1 if heavy else args.warmup
            case.max_samples = args.heavy_runs if heavy else args.runs
        groups.append((label, bare, bwrap, runsc, sandrun, cold))

    # Probe every case once; bare and sandrun must work, bwrap/gVisor may be "n/a".
    # A runner that failed once (gVisor without a working platform) is not tried again.
    runnable = []
    failed_runners = {}
    for label, bare, bwrap, runsc, sandrun, cold in groups:
        cases = (bare, sandrun, cold) if args.profile else (bare, bwrap, runsc, sandrun, cold)
        for case in cases:
            if case.runner in failed_runners:
                case.unavailable, case.short_reason = failed_runners[case.runner]
                continue
            probe(case)
            if case.unavailable is not None:
                failed_runners[case.runner] = (case.unavailable, case.short_reason)
            if case.unavailable is None:
                runnable.append(case)
            elif case in (bare, sandrun, cold):
                raise BenchError(case.unavailable)
            else:
                log(f"n/a: {case.unavailable}")

    load_before = load_average()
    started = time.monotonic()

    def check_time(what):
        spent = time.monotonic() - started
        if spent > args.max_seconds:
            raise BenchError(f"measuring took over {args.max_seconds:.0f} s ({what}); try fewer "
                             "--runs, --heavy-runs, --load-requests or --soak-runs")
        return spent

    # 1. Latency of one run, all runners interleaved round by round.
    hits_before = pool_hits(client)
    unsettled = 0  # sandrun requests sent before the pool was full again (POOL_SETTLE_S)
    total = max(c.warmup + c.max_samples for c in runnable)
    for r in range(total):
        for case in runnable:
            if r >= case.warmup + case.max_samples:
                continue
            if isinstance(case, SandrunCase) and not wait_pool_full(case.client):
                unsettled += 1
            offset = log_size(args.daemon_log) if args.daemon_log else 0
            elapsed = case.run_once()
            if r >= case.warmup:
                case.samples.append(elapsed)
                if isinstance(case, SandrunCase):
                    case.daemon.samples.append(case._last_wall)
                    case.log_offsets.append(offset)
                    case.request_ids.append(case._last_request_id)
        spent = check_time(f"round {r + 1} of {total}")
        log(f"round {r + 1}/{total} done, {spent:.0f} s")

    hits_after = pool_hits(client)
    warm_runs = sum(s.warmup + s.max_samples for _, _, _, _, s, _ in groups if s in runnable)

    # The phase profile: each sandrun request's own log line (the request is sequential, so
    # the first /run line after the offset taken before it is its own).
    profile_rows = []
    if args.daemon_log:
        time.sleep(0.2)  # the daemon logs after the response is sent
        for label, bare, bwrap, runsc, sandrun, cold in groups:
            if label not in PROFILED:
                continue
            for kind, case in (("warm", sandrun), ("cold", cold)):
                stamps = []
                for offset, rid in zip(case.log_offsets, case.request_ids):
                    lines = read_phases(args.daemon_log, offset, rid)
                    if lines:
                        stamps.append(lines[0])
                if stamps:
                    profile_rows += phase_table(f"{label}, {kind}", stamps)

    facts = machine_facts()
    out = []
    command = "scripts/bench" + ("" if args.runs == 30 else f" --runs {args.runs}")
    out.append(f"Measured {facts['date']} with `{command}` "
               f"({args.warmup} warm-up rounds discarded, {args.runs} measured; the plot and numpy: "
               f"1 warm-up, {args.heavy_runs} measured; cases interleaved round by round), "
               f"sandrun at commit `{facts['commit']}`.")
    out.append("")
    out.append(f"Machine: {facts['nproc']} CPUs ({facts['cpu']}), kernel `{facts['kernel']}`, "
               f"Debian {facts['debian']}; load average (1/5/15 min) {load_before} before, "
               f"{facts['load']} after the latency rounds. "
               f"{facts['python']}, {facts['bash']}, {facts['bwrap']}, {facts['runsc']}.")
    out.append("")
    out.append("| program | runner | median ms | p90 ms | median − bare ms | vs bare | vs bwrap |")
    out.append("|---|---|--:|--:|--:|--:|--:|")
    for label, bare, bwrap, runsc, sandrun, cold in groups:
        bare_med = statistics.median(bare.samples)
        bwrap_med = statistics.median(bwrap.samples) if bwrap.samples else None
        for case in (bare, bwrap, runsc, sandrun, sandrun.daemon, cold, cold.daemon):
            if args.profile and case in (bwrap, runsc):
                continue
            if case.unavailable is not None:
                reason = case.short_reason
                out.append(f"| {label} | {case.runner} | n/a: {md_cell(reason)} | | | | |")
                continue
            med = statistics.median(case.samples)
            p90 = percentile(case.samples, 90)
            vs_bare = fmt_ratio(med / bare_med) if bare_med > 0 else "–"
            vs_bwrap = fmt_ratio(med / bwrap_med) if bwrap_med else "–"
            if case is bare:
                vs_bare = "1.0×"
            delta = f"{med - bare_med:+.1f}" if case is not bare else "–"
            out.append(f"| {label} | {case.runner} | {fmt_ms(med)} | {fmt_ms(p90)} | {delta} | "
                       f"{vs_bare} | {vs_bwrap} |")
    if hits_before is not None and hits_after is not None:
        out.append("")
        out.append(f"Warm pool: {hits_after - hits_before} of the {warm_runs} warm requests "
                   f"(warm-up included) were served by a waiting sandbox; the rest found none "
                   f"ready and ran cold. Cold requests ask for disk_mb {COLD_DISK_MB} (the "
                   f"default is 100), which the pool does not fit. Before each sandrun request "
                   f"the bench waits (up to {POOL_SETTLE_S:.0f} s) until the pool is full again, "
                   f"so that no refill shares the CPUs with the measured run, as no other work "
                   f"does with bare or bwrap; {unsettled} requests went without it.")
    if profile_rows:
        out.append("")
        out.append("Phase profile of the sandrun runs above, from the daemon's own CLOCK_MONOTONIC "
                   "stamps (`phases_us` in its JSON log line per request; `read` is the FastCGI "
                   "request read, `sent` the response written; median and p90 of each step):")
        out.append("")
        out.append("| program | step | median ms | p90 ms | runs |")
        out.append("|---|---|--:|--:|--:|")
        out += profile_rows
    if args.profile:
        print("\n".join(out))
        return

    # 2. Throughput of print(1) at 1, 4 and 8 clients: bare spawns and sandrun alternate,
    # round by round; each block is --load-requests requests per client count.
    py_bare, py_sandrun = groups[0][1], groups[0][4]  # warm requests (the pool when ready)
    throughput = {}  # (runner, clients) -> [requests/s per round]
    latencies8 = {"bare": [], "sandrun": []}
    for rnd in range(args.load_rounds):
        for clients in (1, 4, 8):
            count = args.load_requests if clients > 1 else max(8, args.load_requests // 2)
            for runner in ("bare", "sandrun"):
                if runner == "bare":
                    def make_job():
                        return py_bare.run_once
                else:
                    def make_job():
                        case = SandrunCase(py_sandrun.group, SandrunClient(args.url), "python",
                                           "print(1)", b"1\n")
                        return case.run_once
                elapsed, lat, err = run_parallel(make_job, clients, count)
                if err is not None:
                    raise err
                throughput.setdefault((runner, clients), []).append(count / elapsed)
                if clients == 8:
                    latencies8[runner] += lat
            spent = check_time(f"throughput round {rnd + 1}")
            log(f"throughput round {rnd + 1}/{args.load_rounds}, {clients} clients, {spent:.0f} s")

    out.append("")
    out.append(f"Throughput of python3 `print(1)` with N concurrent clients (bare: N threads "
               f"spawning `{PYTHON} -c 'print(1)'`; sandrun: N keep-alive connections posting "
               f"/run), {args.load_requests} requests per block, {args.load_rounds} rounds with "
               f"the runners alternating; median of the rounds:")
    out.append("")
    out.append("| clients | bare runs/s | sandrun runs/s | sandrun vs bare |")
    out.append("|--:|--:|--:|--:|")
    for clients in (1, 4, 8):
        b = statistics.median(throughput[("bare", clients)])
        s = statistics.median(throughput[("sandrun", clients)])
        out.append(f"| {clients} | {b:.1f} | {s:.1f} | {s / b:.2f}× |")
    out.append("")
    out.append("Latency at 8 clients (every request of the 8-client blocks):")
    out.append("")
    out.append("| runner | p50 ms | p90 ms | p99 ms | requests |")
    out.append("|---|--:|--:|--:|--:|")
    for runner in ("bare", "sandrun"):
        lat = latencies8[runner]
        out.append(f"| {runner} | {fmt_ms(percentile(lat, 50))} | {fmt_ms(percentile(lat, 90))} "
                   f"| {fmt_ms(percentile(lat, 99))} | {len(lat)} |")

    # 3. Soak: the daemon's RSS before and after many runs with 1 MiB of output.
    if args.soak_runs > 0:
        expected = "x" * SOAK_BYTES
        soak_body = json.dumps({"language": "python", "code": SOAK_CODE,
                                "limits": {"output_bytes": 4 * SOAK_BYTES}}).encode()

        def make_soak_job():
            c = SandrunClient(args.url)

            def job():
                status, _, data, elapsed = c.request("POST", "/run", soak_body)
                doc = json.loads(data) if status == 200 else None
                if not isinstance(doc, dict) or doc.get("stdout") != expected:
                    got = (doc or {}).get("stdout")
                    raise BenchError(f"soak run: HTTP {status}, status "
                                     f"{(doc or {}).get('status')!r}, stdout of "
                                     f"{len(got) if isinstance(got, str) else 'no'} characters "
                                     f"(expected {SOAK_BYTES} x): {data[-300:]!r}")
                return elapsed
            return job

        rss_before = daemon_rss_kb(daemon_pid) if daemon_pid else None
        peak = [rss_before or 0]
        stop = threading.Event()

        def sample():
            while not stop.wait(0.1):
                v = daemon_rss_kb(daemon_pid) if daemon_pid else None
                if v:
                    peak[0] = max(peak[0], v)

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            elapsed, _, err = run_parallel(make_soak_job, 8, args.soak_runs)
        finally:
            stop.set()
            sampler.join()
        if err is not None:
            raise err
        rss_after = daemon_rss_kb(daemon_pid) if daemon_pid else None
        time.sleep(5)
        rss_idle = daemon_rss_kb(daemon_pid) if daemon_pid else None
        check_time("soak")

        def mb(kb):
            return f"{kb / 1024:.1f}" if kb else "n/a"

        out.append("")
        out.append(f"Daemon memory: {args.soak_runs} runs printing 1 MiB each from 8 clients "
                   f"({elapsed:.0f} s); sandrund's VmRSS (pid {daemon_pid or 'unknown'}):")
        out.append("")
        out.append("| before MB | peak during MB | right after MB | after 5 s idle MB |")
        out.append("|--:|--:|--:|--:|")
        out.append(f"| {mb(rss_before)} | {mb(peak[0])} | {mb(rss_after)} | {mb(rss_idle)} |")

    out.append("")
    out.append("Commands (the program appended):")
    out.append("")
    out.append(f"- bare: `{PYTHON} -c 'print(1)'`, `{BASH} -c 'echo 1'` (environment reduced to "
               "PATH, HOME, LANG for every local case)")
    out.append(f"- bwrap: `{shlex.join(BWRAP)} …`")
    out.append(f"- gVisor: `{shlex.join(runsc_base)} …`")
    out.append(f"- sandrun: `POST /run` through nginx (`{args.url}`), one keep-alive connection, "
               f"sequential requests ({client.connects} TCP connection(s) used); "
               "`usage.wall_ms` is the daemon's clock from clone(2) to the end of the program (init's report)")
    print("\n".join(out))


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        print(f"[bench] ERROR: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
