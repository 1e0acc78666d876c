#!/usr/bin/env python3
"""A fake internet for integration.Network, made by the test itself.

  fake_internet.py up NAME DIR    -> prints one JSON object (the topology), exit 0
  fake_internet.py down NAME      -> removes everything `up NAME` made (idempotent)

`up` makes a network namespace NAME joined to the host by a veth pair, with the addresses
below on its end, a /32 host route into it for each (checked with `ip route get` before any
traffic), a PEP 503 index (`python3 -m http.server` over DIR/index, holding a small wheel
built here with zipfile) listening on port 80 of every address of the namespace, and a
listener on the host side of the veth, and a sink (SINK_PORT on the index's address: accepts,
never reads, closes a connection its peer resets). Nothing is sent anywhere but to these addresses.
Before touching the host it checks that no host address and no route other than the default
one already covers any of them; otherwise it refuses (exit 2) and says which.
Namespaces of earlier runs whose test process is gone (NAME is sandrun-it-net-<pid>) are
removed first.

Two suites can each have one at once: FAKE_INTERNET_OCTET (default 77) is the third octet of
the veth's 198.18.N.0/24 (host side .1, index .2), and FAKE_INTERNET_INDEX_ONLY=1 leaves out
the refused listeners (whose addresses are fixed). The index also holds sandrun-bulk, a wheel
of about 700 KB (integration.Environments' eviction), sandrun-plain (a package of its own),
sandrun-evil (depends on the fixture and ships the fixture's module too: a --target install
of both overwrites one's files with the other's) and sandrun-big (a 12 MiB file).
"""
import base64
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
import zipfile

OCTET = int(os.environ.get("FAKE_INTERNET_OCTET", "77"))
HOST_SIDE = "198.18.%d.1" % OCTET  # the host's end of the veth (a host address: refused)
INDEX = "198.18.%d.2" % OCTET  # the package index (allowed by network_allow_cidrs)
# Addresses a run must never reach although they answer: one per kind of refused range.
REFUSED_IN_NS = {
    "rfc1918_10": "10.213.77.2",
    "rfc1918_172": "172.31.77.2",
    "rfc1918_192": "192.168.213.2",
    "cgnat": "100.77.213.2",
    "link_local_metadata": "169.254.169.254",
    "documentation": "203.0.113.77",
    "benchmarking_not_allowed": "198.18.%d.3" % OCTET,
}
if os.environ.get("FAKE_INTERNET_INDEX_ONLY") == "1":
    REFUSED_IN_NS = {}
HOST_PORT = 8081
# A server on INDEX that accepts and never reads (a run's connections to it fill their
# buffers): a small receive buffer, at most SINK_MAX connections, each closed when its peer
# resets it (what a real server does). Writes the number it holds to DIR/sink.count.
SINK_PORT = 9000
SINK_MAX = 256
SINK_CODE = r"""
import os, select, socket, sys
count_file = sys.argv[1]
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
listener.bind((sys.argv[2], int(sys.argv[3])))
listener.listen(64)
poller = select.poll()
poller.register(listener, select.POLLIN)
held = {}
def note():
    with open(count_file + ".tmp", "w") as f:
        f.write(str(len(held)))
    os.replace(count_file + ".tmp", count_file)
note()
while True:
    for fd, ev in poller.poll():
        if fd == listener.fileno():
            conn, _ = listener.accept()
            if len(held) >= int(sys.argv[4]):
                conn.close()
                continue
            held[conn.fileno()] = conn
            poller.register(conn, select.POLLRDHUP)
        elif ev & (select.POLLERR | select.POLLHUP | select.POLLRDHUP):
            poller.unregister(fd)
            held.pop(fd).close()
        note()
"""
PACKAGE = "sandrun-fixture"
MODULE = "sandrun_fixture"
VALUE = "fixture-value-42"
PLAIN = "sandrun-plain"
EVIL = "sandrun-evil"
EVIL_VALUE = "evil-value-666"
BIG = "sandrun-big"


def sh(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True)


def names(name):
    suffix = name.rsplit("-", 1)[-1]
    return {"ns": name, "host_if": "srh" + suffix[-10:], "ns_if": "srn" + suffix[-10:]}


def pidfile(directory, what):
    return os.path.join(directory, what + ".pid")


def build_wheel(directory, package=PACKAGE, module=MODULE, extra=None, requires=()):
    """A wheel is a zip: the module, METADATA, WHEEL and a RECORD with hashes. `extra` adds
    files (text or bytes), `requires` Requires-Dist lines."""
    simple = os.path.join(directory, "index", "simple", package)
    os.makedirs(simple, exist_ok=True)
    dist = module + "-1.0.dist-info"
    metadata = "Metadata-Version: 2.1\nName: %s\nVersion: 1.0\n" % package
    metadata += "".join("Requires-Dist: %s\n" % r for r in requires)
    files = {
        module + "/__init__.py": 'VALUE = "%s"\n' % VALUE,
        dist + "/METADATA": metadata,
        dist + "/WHEEL": "Wheel-Version: 1.0\nGenerator: sandrun-test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    files.update(extra or {})
    files = {path: (data if isinstance(data, bytes) else data.encode()) for path, data in
             files.items()}
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        record.append("%s,sha256=%s,%d" % (path, digest.decode(), len(data)))
    record.append(dist + "/RECORD,,")
    files[dist + "/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = os.path.join(simple, module + "-1.0-py3-none-any.whl")
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            z.writestr(path, data)
    # http.server's directory listing is a valid PEP 503 project page (links to the files).
    return wheel


def covered_by_host(addr):
    """Why the host already reaches `addr` some other way than its default route, or ''."""
    out = sh("ip", "-o", "addr", "show").stdout
    if re.search(r"inet6? %s/" % re.escape(addr), out):
        return "a host interface has it"
    routes = sh("ip", "route", "show", "match", addr).stdout.splitlines()
    specific = [r for r in routes if r and not r.startswith("default")]
    if specific:
        return "host route(s): " + "; ".join(specific)
    return ""


def stale_cleanup():
    out = sh("ip", "netns", "list", check=False).stdout
    for line in out.splitlines():
        m = re.match(r"(sandrun-it-net-(\d+))", line)
        if m and not os.path.exists("/proc/" + m.group(2)):
            down(m.group(1))


def wait_http(url, deadline_s=10):
    end = time.time() + deadline_s
    while True:
        try:
            # No proxy from the environment: only these addresses, directly.
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            with opener.open(url, timeout=2) as r:
                return r.status
        except OSError:
            if time.time() > end:
                raise
            time.sleep(0.2)


def wait_file(path, deadline_s=10):
    end = time.monotonic() + deadline_s
    while not os.path.exists(path):
        if time.monotonic() > end:
            raise SystemExit("fake_internet: %s did not appear" % path)
        time.sleep(0.05)


def up(name, directory):
    stale_cleanup()
    n = names(name)
    addrs = [HOST_SIDE, INDEX] + list(REFUSED_IN_NS.values())
    problems = [a + ": " + why for a in addrs if (why := covered_by_host(a))]
    if problems:
        print("fake_internet: refusing to touch the host: " + ", ".join(problems), file=sys.stderr)
        sys.exit(2)
    build_wheel(directory)
    # Incompressible bytes as text (hex), stored in the zip: about 700 KB installed.
    build_wheel(directory, "sandrun-bulk", "sandrun_bulk",
                {"sandrun_bulk/blob.txt": os.urandom(350 * 1024).hex()})
    # Another package of its own (a set only the environments' poisoning test uses).
    build_wheel(directory, PLAIN, PLAIN.replace("-", "_"))
    # A distribution that depends on the fixture and ships the fixture's module as well:
    # pip --target lets it overwrite the fixture's files.
    build_wheel(directory, EVIL, EVIL.replace("-", "_"),
                {MODULE + "/__init__.py": 'VALUE = "%s"\n' % EVIL_VALUE}, requires=[PACKAGE])
    # A package with a 12 MiB file (zeros: small in the wheel), past a program's file_size_mb.
    build_wheel(directory, BIG, BIG.replace("-", "_"), {"sandrun_big/data.bin": bytes(12 << 20)})
    sh("ip", "netns", "add", n["ns"])
    sh("ip", "link", "add", n["host_if"], "type", "veth", "peer", "name", n["ns_if"])
    sh("ip", "link", "set", n["ns_if"], "netns", n["ns"])
    sh("ip", "addr", "add", HOST_SIDE + "/24", "dev", n["host_if"])
    sh("ip", "link", "set", n["host_if"], "up")
    ns = ["ip", "netns", "exec", n["ns"]]
    sh(*ns, "ip", "addr", "add", INDEX + "/24", "dev", n["ns_if"])
    for addr in REFUSED_IN_NS.values():
        sh(*ns, "ip", "addr", "add", addr + "/32", "dev", n["ns_if"])
    sh(*ns, "ip", "link", "set", n["ns_if"], "up")
    sh(*ns, "ip", "link", "set", "lo", "up")
    for addr in REFUSED_IN_NS.values():
        if not addr.startswith("198.18.%d." % OCTET):
            sh("ip", "route", "add", addr + "/32", "dev", n["host_if"])
    # Routes checked before any traffic: every address goes into the veth, nowhere else.
    for addr in addrs[1:]:
        got = sh("ip", "route", "get", addr).stdout
        if "dev " + n["host_if"] not in got:
            down(name)
            print("fake_internet: %s is not routed into %s: %s" % (addr, n["host_if"], got),
                  file=sys.stderr)
            sys.exit(2)
    log = open(os.path.join(directory, "servers.log"), "ab")
    index = subprocess.Popen(ns + [sys.executable, "-m", "http.server", "80", "--bind", "0.0.0.0",
                                   "--directory", os.path.join(directory, "index")],
                             stdout=log, stderr=log, start_new_session=True)
    with open(pidfile(directory, "index"), "w") as f:
        f.write(str(index.pid))
    sink = subprocess.Popen(ns + [sys.executable, "-c", SINK_CODE,
                                  os.path.join(directory, "sink.count"), INDEX, str(SINK_PORT),
                                  str(SINK_MAX)],
                            stdout=log, stderr=log, start_new_session=True)
    with open(pidfile(directory, "sink"), "w") as f:
        f.write(str(sink.pid))
    os.makedirs(os.path.join(directory, "host"), exist_ok=True)
    with open(os.path.join(directory, "host", "index.html"), "w") as f:
        f.write("host side of the veth\n")
    host = subprocess.Popen([sys.executable, "-m", "http.server", str(HOST_PORT), "--bind",
                             HOST_SIDE, "--directory", os.path.join(directory, "host")],
                            stdout=log, stderr=log, start_new_session=True)
    with open(pidfile(directory, "host"), "w") as f:
        f.write(str(host.pid))
    # Positive controls: each listener answers from the host, so a refusal seen from a run is
    # the firewall's doing.
    for addr in [INDEX] + list(REFUSED_IN_NS.values()):
        wait_http("http://%s/" % addr)
    wait_http("http://%s:%d/" % (HOST_SIDE, HOST_PORT))
    wait_http("http://%s/simple/%s/" % (INDEX, PACKAGE))
    wait_file(os.path.join(directory, "sink.count"))
    print(json.dumps({"ns": n["ns"], "host_if": n["host_if"], "index": INDEX,
                      "host_side": HOST_SIDE, "host_port": HOST_PORT,
                      "refused": REFUSED_IN_NS, "package": PACKAGE, "module": MODULE,
                      "value": VALUE, "dir": directory, "bulk_package": "sandrun-bulk",
                      "sink_port": SINK_PORT, "sink_max": SINK_MAX,
                      "plain_package": PLAIN, "evil_package": EVIL, "evil_value": EVIL_VALUE,
                      "big_package": BIG}))


def down(name, directory=None):
    n = names(name)
    if directory:
        for what in ("index", "host", "sink"):
            try:
                with open(pidfile(directory, what)) as f:
                    os.killpg(int(f.read()), signal.SIGKILL)
            except (OSError, ValueError):
                pass
    # Whatever still runs in the namespace (the index server) goes with it.
    pids = sh("ip", "netns", "pids", n["ns"], check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass
    sh("ip", "link", "del", n["host_if"], check=False)  # its routes go with it
    sh("ip", "netns", "del", n["ns"], check=False)


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "up":
        up(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 3 and sys.argv[1] == "down":
        down(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(64)
