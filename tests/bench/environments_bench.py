#!/usr/bin/env python3
"""Prepared environments: a run that builds its `packages` against one served from the cache
(scripts/bench --environments).

Serves packages the way integration.Environments does: tests/integration/fake_internet.py
makes a network namespace holding a PEP 503 index (a small wheel, sandrun-fixture) on its own
198.18.N.2 address (a /32 route, nothing else is reached), and a sandrun stack of its own
(scripts/serve, temporary state directory, free port) uses it: "network": "on_request", the
index allowed and named as pip's. Then, round by round:
  build:  a run with packages ["sandrun-fixture!=0.0.<round>"]: a set no earlier round asked
          for, so the daemon builds it (pip in a sandbox, with the network); its answer says
          "built";
  cached: the same request again: the daemon serves the environment it built; "cached";
  none:   the same program without packages (its import fails; only the time is kept), for
          what a run costs without an environment.
Each is one POST /run through nginx, timed end to end. Prints a Markdown table; fails only on
a wrong answer (a build that is not "built", a cached run that is not "cached" or misses the
package's output), never on a slow one.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
from zygote_bench import Stack  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAKE_INTERNET = os.path.join(REPO, "tests/integration/fake_internet.py")
# The third octet of the fake internet's 198.18.N.0/24: none of the integration suites' (77-79).
OCTET = "75"


class FakeIndex:
    """fake_internet.py up/down, index only (named like the tests': a dead owner's is swept)."""

    def __init__(self):
        self.name = f"sandrun-it-net-{os.getpid()}"
        self.dir = tempfile.mkdtemp(prefix="/tmp/sandrun-eb-index.")
        self.env = dict(os.environ, FAKE_INTERNET_OCTET=OCTET, FAKE_INTERNET_INDEX_ONLY="1")
        up = subprocess.run([sys.executable, FAKE_INTERNET, "up", self.name, self.dir],
                            env=self.env, capture_output=True, text=True, timeout=120)
        if up.returncode != 0:
            self.down()
            raise bench.BenchError(f"fake_internet.py up failed ({up.returncode}): "
                                   f"{up.stdout}{up.stderr}")
        self.topology = json.loads(up.stdout)

    def down(self):
        subprocess.run([sys.executable, FAKE_INTERNET, "down", self.name, self.dir],
                       env=self.env, capture_output=True, timeout=120)
        shutil.rmtree(self.dir, ignore_errors=True)


def post_run(client, body):
    status, _, data, ms = client.request("POST", "/run", json.dumps(body).encode())
    if status != 200:
        raise bench.BenchError(f"POST /run answered {status}: {data[:300]!r}")
    return json.loads(data), ms


def environment_round(client, topo, i):
    code = f"import {topo['module']}; print({topo['module']}.VALUE)"
    want = topo["value"] + "\n"
    body = {"packages": [f"{topo['package']}!=0.0.{i}"], "language": "python", "code": code}
    built, build_ms = post_run(client, body)
    env = built.get("environment", {})
    if env.get("status") != "built" or built.get("stdout") != want:
        raise bench.BenchError(f"round {i}: the first run was not a build: {json.dumps(built)[:400]}")
    cached, cached_ms = post_run(client, body)
    if cached.get("environment", {}).get("status") != "cached" or cached.get("stdout") != want:
        raise bench.BenchError(f"round {i}: the second run was not cached: "
                               f"{json.dumps(cached)[:400]}")
    _, none_ms = post_run(client, {"language": "python", "code": code})
    return build_ms, env.get("build_ms", 0), cached_ms, none_ms


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=1)
    args = parser.parse_args()
    index = FakeIndex()
    stack = None
    try:
        topo = index.topology
        stack = Stack("environments", {
            "network": "on_request",
            "network_allow_cidrs": [topo["index"] + "/32"],
            "pip_index_url": f"http://{topo['index']}/simple",
            "pip_trusted_hosts": [topo["index"]],
        })
        stack.wait()
        client = bench.SandrunClient(stack.url)
        samples = {"build": [], "build_ms": [], "cached": [], "none": []}
        for i in range(args.warmup + args.runs):
            values = environment_round(client, topo, i)
            bench.log(f"round {i}: build {values[0]:.0f} ms (build_ms {values[1]}), "
                      f"cached {values[2]:.0f} ms, no packages {values[3]:.0f} ms")
            if i >= args.warmup:
                for key, v in zip(samples, values):
                    samples[key].append(v)
        print(f"Load average at the start of the table: {bench.load_average()} (shared machine)\n")
        print(f"| POST /run, python import of one package ({args.runs} rounds) "
              "| median ms | p90 ms | × cached |")
        print("|---|---|---|---|")
        cached_med = statistics.median(samples["cached"])
        rows = [("packages, first request: built (pip in a sandbox)", samples["build"]),
                ("of which the daemon's build_ms", samples["build_ms"]),
                ("packages, same request again: cached", samples["cached"]),
                ("no packages (the same program)", samples["none"])]
        for name, v in rows:
            med = statistics.median(v)
            print(f"| {name} | {bench.fmt_ms(med)} | {bench.fmt_ms(bench.percentile(v, 90))} "
                  f"| {bench.fmt_ratio(med / cached_med)} |")
        print(f"\nLoad average at the end: {bench.load_average()}")
    finally:
        if stack is not None:
            stack.stop()
        index.down()


if __name__ == "__main__":
    try:
        main()
    except bench.BenchError as e:
        print(f"environments bench: {e}", file=sys.stderr)
        sys.exit(1)
