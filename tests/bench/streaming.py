"""Streamed /run against plain /run, side by side (scripts/bench --streaming).

Two measurements, each interleaved round by round (streamed, plain, streamed, ...) so that a
change in the machine's load hits both alike:

  1. python3 `print(1)`: wall-clock from the request sent to the whole answer read (plain: the
     JSON; streamed: every line up to the `result` event), on one keep-alive connection each.
  2. Time to the first line of a 2 s program (`print(1)` at t=0, then `time.sleep(2)`):
     streamed, until its `stdout` event arrived; plain, until the answer (the only place the
     line is in) was read.

Every answer is checked (status ok, stdout "1\\n", the streamed `result` equal to a plain
answer's shape); a wrong one fails the benchmark. Prints a Markdown table on stdout, progress
on stderr. Python 3 standard library only.
"""

import argparse
import http.client
import json
import os
import statistics
import sys
import time
import urllib.parse


class BenchError(Exception):
    pass


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def percentile(values, p):
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


class Client:
    """One keep-alive connection to the stack's nginx."""

    def __init__(self, url):
        parsed = urllib.parse.urlsplit(url)
        self.host, self.port = parsed.hostname, parsed.port or 80
        self.prefix = parsed.path.rstrip("/")
        self.token = os.environ.get("SANDRUN_TOKEN", "")
        self.conn = None

    def _headers(self, streamed):
        headers = {"Content-Type": "application/json"}
        if streamed:
            headers["Accept"] = "application/x-ndjson"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def run(self, code, streamed):
        """POST /run; returns (ms to the first stdout line, ms to the end, the answer)."""
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
            self.conn.connect()
        body = json.dumps({"language": "python", "code": code}).encode()
        t0 = time.perf_counter()
        self.conn.request("POST", self.prefix + "/run", body=body, headers=self._headers(streamed))
        resp = self.conn.getresponse()
        first_ms = None
        if not streamed:
            data = resp.read()
            end_ms = (time.perf_counter() - t0) * 1000.0
            answer = self._answer(resp, data)
            return end_ms, end_ms, answer
        if resp.status != 200 or resp.getheader("Content-Type") != "application/x-ndjson":
            raise BenchError(f"streamed POST /run: HTTP {resp.status}: {resp.read()[:2000]!r}")
        answer = None
        while True:
            line = resp.readline()
            if not line:
                break
            event = json.loads(line)
            if event.get("event") == "stdout" and first_ms is None:
                first_ms = (time.perf_counter() - t0) * 1000.0
            if event.get("event") == "result":
                answer = event["result"]
        resp.read()
        end_ms = (time.perf_counter() - t0) * 1000.0
        if answer is None:
            raise BenchError("streamed POST /run: no result event")
        return first_ms, end_ms, answer

    @staticmethod
    def _answer(resp, data):
        try:
            doc = json.loads(data)
        except ValueError:
            doc = None
        if resp.status != 200 or not isinstance(doc, dict):
            raise BenchError(f"POST /run: HTTP {resp.status}: {data[:2000]!r}")
        return doc


def check(answer, what):
    if answer.get("status") != "ok" or answer.get("stdout") != "1\n":
        raise BenchError(f"{what}: status {answer.get('status')!r}, stdout "
                         f"{answer.get('stdout')!r}, stderr {str(answer.get('stderr'))[-500:]!r}")


def measure(url, code, rounds, warmup, first_line):
    """{"streamed": [ms], "plain": [ms]} of `rounds` interleaved rounds after `warmup`."""
    clients = {"streamed": Client(url), "plain": Client(url)}
    samples = {"streamed": [], "plain": []}
    for i in range(warmup + rounds):
        for kind in ("streamed", "plain"):
            first_ms, end_ms, answer = clients[kind].run(code, kind == "streamed")
            check(answer, f"{kind} {code!r}")
            if first_ms is None:
                raise BenchError(f"{kind} {code!r}: no stdout event")
            if i >= warmup:
                samples[kind].append(first_ms if first_line else end_ms)
    return samples


def rows(label, samples):
    plain = statistics.median(samples["plain"])
    out = []
    for kind in ("plain", "streamed"):
        med = statistics.median(samples[kind])
        out.append(f"| {label} | {kind} | {med:.1f} | {percentile(samples[kind], 90):.1f} | "
                   f"{med / plain:.2f}× |")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True, help="sandrun base URL (nginx)")
    ap.add_argument("--runs", type=int, default=30, help="measured rounds of print(1)")
    ap.add_argument("--warmup", type=int, default=3, help="discarded rounds first")
    ap.add_argument("--slow-runs", type=int, default=5, help="measured rounds of the 2 s program")
    args = ap.parse_args()
    if args.runs < 1 or args.warmup < 0 or args.slow_runs < 1:
        raise BenchError("--runs and --slow-runs must be >= 1, --warmup >= 0")
    log(f"print(1): {args.warmup} warm-up + {args.runs} rounds, streamed and plain")
    quick = measure(args.url, "print(1)", args.runs, args.warmup, first_line=False)
    log(f"a 2 s program: {args.slow_runs} rounds, streamed and plain")
    slow = measure(args.url, "import time\nprint(1)\ntime.sleep(2)", args.slow_runs, 0,
                   first_line=True)
    out = ["| measurement | answer | median ms | p90 ms | vs plain |", "|---|---|--:|--:|--:|"]
    out += rows("python3 `print(1)`, request to whole answer", quick)
    out += rows("first line of a 2 s program (`print(1)` at t=0), request to that line", slow)
    print("\n".join(out))


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        print(f"bench: {e}", file=sys.stderr)
        sys.exit(1)
