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

    def __init__(self, group, client, language, code, expected):
        super().__init__(group, "sandrun, HTTP end-to-end",
                         f"POST /run {json.dumps({'language': language, 'code': code})}")
        self.client = client
        self.body = json.dumps({"language": language, "code": code}).encode()
        self.expected = expected.decode()
        self.daemon = Case(group, "sandrun, daemon `usage.wall_ms`",
                           "the same requests: the daemon's own wall time (clone to reap)")

    def run_once(self):
        status, _, data, elapsed = self.client.request("POST", "/run", self.body)
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
        wall = (doc.get("usage") or {}).get("wall_ms")
        if not isinstance(wall, (int, float)):
            raise BenchError(f"{self.describe}: no usage.wall_ms in {data[:500]!r}")
        self._last_wall = float(wall)
        return elapsed


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True, help="sandrun base URL (nginx), e.g. http://127.0.0.1:8080")
    ap.add_argument("--runs", type=int, default=30, help="measured rounds (default 30)")
    ap.add_argument("--warmup", type=int, default=3, help="discarded rounds first (default 3)")
    ap.add_argument("--runsc-flags", default=DEFAULT_RUNSC_FLAGS,
                    help=f"global runsc flags before `do` (default {DEFAULT_RUNSC_FLAGS!r})")
    ap.add_argument("--max-seconds", type=float, default=300,
                    help="fail if measuring takes longer than this (default 300)")
    args = ap.parse_args()
    if args.runs < 1 or args.warmup < 0:
        raise BenchError("--runs must be >= 1 and --warmup >= 0")

    client = SandrunClient(args.url)
    status, _, data, _ = client.request("GET", "/healthz")
    if status != 200:
        raise BenchError(f"GET {args.url}/healthz: HTTP {status}: {data[:500]!r}")

    workdir = tempfile.mkdtemp(prefix="sandrun-bench-")
    atexit.register(shutil.rmtree, workdir, ignore_errors=True)
    runsc_base = ["runsc", *shlex.split(args.runsc_flags), "do", "--cwd", "/tmp"]

    programs = [
        # group label, local argv tail, sandrun language, code, expected stdout
        ("python3 `print(1)`", [PYTHON, "-c", "print(1)"], "python", "print(1)", b"1\n"),
        ("bash `echo 1`", [BASH, "-c", "echo 1"], "bash", "echo 1", b"1\n"),
        ("bash `true`", [BASH, "-c", "true"], "bash", "true", b""),
    ]
    groups = []
    for label, argv, language, code, expected in programs:
        bare = ProcessCase(label, "bare", argv, expected, workdir)
        bwrap = ProcessCase(label, "bwrap", BWRAP + argv, expected, workdir)
        runsc = ProcessCase(label, "gVisor `runsc do`", runsc_base + argv, expected, workdir)
        sandrun = SandrunCase(label, client, language, code, expected)
        groups.append((label, bare, bwrap, runsc, sandrun))

    # Probe every case once; bare and sandrun must work, bwrap/gVisor may be "n/a".
    # A runner that failed once (gVisor without a working platform) is not tried again.
    runnable = []
    failed_runners = {}
    for label, bare, bwrap, runsc, sandrun in groups:
        for case in (bare, bwrap, runsc, sandrun):
            if case.runner in failed_runners:
                case.unavailable, case.short_reason = failed_runners[case.runner]
                continue
            probe(case)
            if case.unavailable is not None:
                failed_runners[case.runner] = (case.unavailable, case.short_reason)
            if case.unavailable is None:
                runnable.append(case)
            elif case in (bare, sandrun):
                raise BenchError(case.unavailable)
            else:
                log(f"n/a: {case.unavailable}")

    load_before = load_average()
    started = time.monotonic()
    total = args.warmup + args.runs
    for r in range(total):
        for case in runnable:
            elapsed = case.run_once()
            if r >= args.warmup:
                case.samples.append(elapsed)
                if isinstance(case, SandrunCase):
                    case.daemon.samples.append(case._last_wall)
        spent = time.monotonic() - started
        if spent > args.max_seconds:
            raise BenchError(f"measuring took over {args.max_seconds:.0f} s (round {r + 1} of "
                             f"{total}); try fewer --runs")
        log(f"round {r + 1}/{total}{' (warm-up)' if r < args.warmup else ''} done, {spent:.0f} s")

    facts = machine_facts()
    out = []
    out.append(f"Measured {facts['date']} with `scripts/bench --runs {args.runs}` "
               f"({args.warmup} warm-up rounds discarded; cases interleaved round by round), "
               f"sandrun at commit `{facts['commit']}`.")
    out.append("")
    out.append(f"Machine: {facts['nproc']} CPUs ({facts['cpu']}), kernel `{facts['kernel']}`, "
               f"Debian {facts['debian']}; load average (1/5/15 min) {load_before} before, "
               f"{facts['load']} after. "
               f"{facts['python']}, {facts['bash']}, {facts['bwrap']}, {facts['runsc']}.")
    out.append("")
    out.append("| program | runner | median ms | p90 ms | median − bare ms | vs bare | vs bwrap |")
    out.append("|---|---|--:|--:|--:|--:|--:|")
    for label, bare, bwrap, runsc, sandrun in groups:
        bare_med = statistics.median(bare.samples)
        bwrap_med = statistics.median(bwrap.samples) if bwrap.samples else None
        for case in (bare, bwrap, runsc, sandrun, sandrun.daemon):
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
    out.append("")
    out.append("Commands (the program appended):")
    out.append("")
    out.append(f"- bare: `{PYTHON} -c 'print(1)'`, `{BASH} -c 'echo 1'` (environment reduced to "
               "PATH, HOME, LANG for every local case)")
    out.append(f"- bwrap: `{shlex.join(BWRAP)} …`")
    out.append(f"- gVisor: `{shlex.join(runsc_base)} …`")
    out.append(f"- sandrun: `POST /run` through nginx (`{args.url}`), one keep-alive connection, "
               f"sequential requests ({client.connects} TCP connection(s) used); "
               "`usage.wall_ms` is the daemon's clock from clone(2) to reaping the sandbox")
    print("\n".join(out))


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        print(f"[bench] ERROR: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
