// Packages and network, against a fake internet the test makes itself
// (fake_internet.py): a network namespace joined to the host by a veth pair, holding a PEP 503
// index with a wheel built by the test and listeners on addresses a run must never reach.
// Suite Network runs on a stack with "network": "on_request", the index allowed by
// network_allow_cidrs and named by pip_index_url (tests/integration/CMakeLists.txt); suite
// NetworkOff on the default config ("network": "off"). No traffic goes anywhere but to the
// test's own namespace addresses and 127.0.0.1: every address a run tries is routed into
// that namespace first (fake_internet.py checks with `ip route get`), and the refused ones
// are refused inside the run before any packet leaves it.
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <thread>

#include "fake_internet.h"
#include "helpers.h"
#include "socket_memory.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

using Clock = std::chrono::steady_clock;

std::string InstallThenImport(const FakeInternet& net) {
  return "Install the package first:\n\n```bash\npip install " + net.S("package") +
         "\n```\n\nThen use it:\n\n```python\nimport " + net.S("module") + "\nprint(" +
         net.S("module") + ".VALUE)\n```\n";
}

// A Python program that tries each target (host, port) once and prints "REACHED name" or
// "refused name ExceptionName" per target.
std::string ConnectProgram(const std::vector<std::tuple<std::string, std::string, int>>& targets) {
  std::string code = "import socket\ntargets = [\n";
  for (const auto& [name, host, port] : targets) {
    code += "  (" + Q(name) + ", " + Q(host) + ", " + std::to_string(port) + "),\n";
  }
  code +=
      "]\nfor name, host, port in targets:\n"
      "  try:\n"
      "    s = socket.create_connection((host, port), timeout=3)\n"
      "    s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\n"
      "    got = s.recv(64)\n"
      "    print('REACHED', name, got[:12])\n"
      "  except Exception as e:\n"
      "    print('refused', name, type(e).__name__, e)\n";
  return code;
}

std::string Output(const rapidjson::Document& doc) {
  return Str(doc, "stdout") + Str(doc, "stderr");
}

std::string KernelStatus(const rapidjson::Document& doc) {
  if (!doc.IsObject() || !doc.HasMember("kernel") || !doc["kernel"].IsObject()) {
    return "(no kernel)";
  }
  return Str(doc["kernel"], "status");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(Network, *boost::unit_test::fixture<FakeInternet>())

BOOST_AUTO_TEST_CASE(pip_then_python_markdown_installs_from_the_index_and_prints_the_value) {
  const FakeInternet& net = Net();
  auto doc = PostRun(R"({"network": true, "markdown": )" + Q(InstallThenImport(net)) + "}");
  const std::string out = Output(doc);
  BOOST_TEST(Str(doc, "status") == "ok", out);
  BOOST_TEST(Str(doc, "stdout").find(net.S("value")) != std::string::npos, out);
  // Per step: which budget it ran on.
  const auto& steps = doc["snippets"];
  BOOST_TEST_REQUIRE(steps.Size() == 2u);
  BOOST_TEST(Str(steps[0], "budget") == "install");
  BOOST_TEST(Str(steps[1], "budget") == "program");
  // Usage: bytes in and out through the run's network (the wheel came in).
  BOOST_TEST(Int(doc["usage"], "net_rx_bytes") > 1000);
  BOOST_TEST(Int(doc["usage"], "net_tx_bytes") > 100);
  // pip's own files are neither exported nor listed as skipped.
  for (const auto& f : doc["files"].GetArray()) BOOST_TEST(Str(f, "path").find(".local") != 0u);
}

BOOST_AUTO_TEST_CASE(pip_as_users_type_it) {
  const FakeInternet& net = Net();
  const std::string pkg = net.S("package"), mod = net.S("module");
  const std::string check =
      "\n```python\nimport " + mod + "; print('got', " + mod + ".VALUE)\n```\n";
  for (const std::string& md : {"```bash\npip3 install " + pkg + "\n```\n" + check,
                                "```sh\npython3 -m pip install --quiet " + pkg + "\n```\n" + check,
                                "```python\n%pip install " + pkg + "\nimport " + mod +
                                    "; print('got', " + mod + ".VALUE)\n```\n",
                                "```python\n!pip install " + pkg + "\nimport " + mod +
                                    "; print('got', " + mod + ".VALUE)\n```\n"}) {
    auto doc = PostRun(R"({"network": true, "markdown": )" + Q(md) + "}");
    BOOST_TEST(Str(doc, "stdout").find("got " + net.S("value")) != std::string::npos,
               md << "\n"
                  << Output(doc));
  }
}

// An install goes to the workspace's ~/.local: a later run of the same session imports it,
// without the network.
BOOST_AUTO_TEST_CASE(a_later_run_of_the_session_imports_what_an_earlier_one_installed) {
  const FakeInternet& net = Net();
  const std::string session = "net-session-" + std::to_string(::getpid());
  auto first = PostRun(R"({"network": true, "session": )" + Q(session) +
                       R"(, "language": "bash", "code": )" +
                       Q("pip install --quiet " + net.S("package") + " && echo installed") + "}");
  BOOST_TEST(Str(first, "stdout").find("installed") != std::string::npos, Output(first));
  auto second =
      PostRun(R"({"session": )" + Q(session) + R"(, "language": "python", "code": )" +
              Q("import " + net.S("module") + "; print(" + net.S("module") + ".VALUE)") + "}");
  BOOST_TEST(Str(second, "stdout") == net.S("value") + "\n", Output(second));
}

BOOST_AUTO_TEST_CASE(without_network_the_install_ends_fast_and_says_why) {
  const FakeInternet& net = Net();
  const std::string md = "```bash\npip install numpy " + net.S("package") + "\n```\n" +
                         "```python\nimport " + net.S("module") + "\n```\n";
  const auto start = Clock::now();
  auto doc = PostRun(R"({"markdown": )" + Q(md) + "}");
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  const std::string err = Str(doc, "stderr");
  BOOST_TEST(Str(doc, "status") == "error", err);
  BOOST_TEST(ms < 10000, ms << " ms");
  BOOST_TEST_MESSAGE("install without network answered in " << ms << " ms");
  // This suite's server gives the network on request: the note says the run did not ask.
  BOOST_TEST(err.find("this run has no network") != std::string::npos, err);
  BOOST_TEST(err.find("Already available: numpy.") != std::string::npos, err);
  BOOST_TEST(err.find("Not available: " + net.S("package")) != std::string::npos, err);
  for (const char* fix : {"\"network\": true", "\"packages\""}) {
    BOOST_TEST(err.find(fix) != std::string::npos, fix);
  }
  BOOST_TEST(doc["snippets"].Size() == 1u);  // the import never ran
}

// With the network, an index that cannot be reached (here a closed port of the fake
// internet's allowed index address) leaves pip saying only "from versions: none": sandrun's
// last line says the index was not reached, and what the admin can set.
BOOST_AUTO_TEST_CASE(an_unreachable_index_is_named_not_taken_for_a_missing_package) {
  const FakeInternet& net = Net();
  const std::string index = "http://" + net.S("index") + ":9/simple";
  auto doc =
      PostRun(R"({"network": true, "language": "bash", "code": )" +
              Q("pip install --retries 1 --index-url " + index + " " + net.S("package")) + "}");
  const std::string err = Str(doc, "stderr");
  BOOST_TEST(Str(doc, "status") == "error", err);
  BOOST_TEST(err.find("from versions: none") != std::string::npos, err);
  BOOST_TEST(err.find("sandrun: pip could not reach the package index (" + index +
                      "): the connection was refused, so \"from versions: none\" says nothing") !=
                 std::string::npos,
             err);
  for (const char* key :
       {"\"pip_index_url\"", "\"pip_trusted_hosts\"", "\"network_allow_cidrs\""}) {
    BOOST_TEST(err.find(key) != std::string::npos, key);
  }
  BOOST_TEST(err.find("the network is off") == std::string::npos, err);
  // The index itself, reached, still installs: the note is not said then.
  auto ok = PostRun(R"({"network": true, "language": "bash", "code": )" +
                    Q("pip install --quiet " + net.S("package") + " && echo installed") + "}");
  BOOST_TEST(Str(ok, "stdout").find("installed") != std::string::npos, Output(ok));
  BOOST_TEST(Str(ok, "stderr").find("could not reach") == std::string::npos, Output(ok));
}

BOOST_AUTO_TEST_CASE(refused_addresses_are_refused_while_the_index_answers) {
  const FakeInternet& net = Net();
  const int port = Stack::Get().port();
  std::vector<std::tuple<std::string, std::string, int>> targets = {
      {"index", net.S("index"), 80},
      {"host_side_of_veth", net.S("host_side"), net.topology["host_port"].GetInt()},
      {"host_loopback_via_slirp_gateway", "10.0.2.2", port},
      {"slirp_dns_address_other_port", "10.0.2.3", 80},
      {"slirp_network_other_address", "10.0.2.4", 80},
  };
  for (const auto& [kind, addr] : net.Refused()) targets.emplace_back(kind, addr, 80);
  auto doc = PostRun(R"({"network": true, "language": "python", "limits": {"wall_time_s": 60},
                         "code": )" +
                     Q(ConnectProgram(targets)) + "}");
  const std::string out = Str(doc, "stdout");
  BOOST_TEST_MESSAGE(out);
  BOOST_TEST(out.find("REACHED index b'HTTP/1.0 200") != std::string::npos, out);
  for (const auto& [name, addr, p] : targets) {
    if (name == "index") continue;
    BOOST_TEST(out.find("refused " + name + " ") != std::string::npos, name << "\n" << out);
    // Refused at once by the rules, not timed out on the way.
    BOOST_TEST(out.find("refused " + name + " TimeoutError") == std::string::npos, name);
  }
  // The run's own loopback is its own: the host's nginx on 127.0.0.1 is not there.
  auto local =
      PostRun(R"({"network": true, "language": "python", "code": )" +
              Q(ConnectProgram({{"own_loopback_port_of_host_nginx", "127.0.0.1", port}})) + "}");
  BOOST_TEST(Str(local, "stdout").find("refused own_loopback") != std::string::npos,
             Str(local, "stdout"));
}

// The rules are read from the run's own namespace while it runs (nsenter as host root; the
// program itself cannot list or change them): every refused range is in them.
BOOST_AUTO_TEST_CASE(the_running_sandbox_has_every_refused_range_in_its_rules) {
  const std::string marker = "7.25" + std::to_string(::getpid() % 1000);
  auto pending = std::async(std::launch::async, [&] {
    return PostRun(
        R"({"network": true, "language": "bash", "code": "/usr/sbin/nft list ruleset 2>&1 | head -2; sleep )" +
        marker + R"("})");
  });
  std::string rules;
  for (int i = 0; i < 100 && rules.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::string pid = Shell("pgrep -f -x 'sleep " + marker + "' | head -1");
    if (!pid.empty()) {
      rules =
          Shell("nsenter -t " + pid.substr(0, pid.find('\n')) + " -n nft list table inet sandrun");
    }
  }
  auto doc = pending.get();
  BOOST_TEST_REQUIRE(!rules.empty(), "no rules read from the running sandbox");
  // The program could not read them (no CAP_NET_ADMIN; netfilter netlink refused).
  BOOST_TEST(Str(doc, "stdout").find("table inet") == std::string::npos, Str(doc, "stdout"));
  // As nft lists them: adjacent networks merged (224.0.0.0/4 multicast + 240.0.0.0/4
  // reserved, which holds 255.255.255.255, are 224.0.0.0/3; fe80::/10 link-local, fec0::/10
  // and ff00::/8 multicast are one range to the end of the space). ::1 and :: are in ::/96.
  for (const char* range :
       {"0.0.0.0/8",         "10.0.0.0/8",
        "100.64.0.0/10",     "127.0.0.0/8",
        "169.254.0.0/16",    "172.16.0.0/12",
        "192.0.0.0/24",      "192.0.2.0/24",
        "192.168.0.0/16",    "198.18.0.0/15",
        "198.51.100.0/24",   "203.0.113.0/24",
        "224.0.0.0/3",       "::/96",
        "::ffff:0.0.0.0/96", "64:ff9b::/96",
        "100::/64",          "2001::/23",
        "2001:db8::/32",     "2002::/16",
        "fc00::/7",          "fe80::-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}) {
    BOOST_TEST(rules.find(range) != std::string::npos, range << "\n" << rules);
  }
  // The host's own addresses (the veth's host side among them), and the allowed index.
  BOOST_TEST(rules.find(Net().S("host_side")) != std::string::npos, rules);
  BOOST_TEST(rules.find(Net().S("index")) != std::string::npos, rules);
  BOOST_TEST(rules.find("10.0.2.3 udp dport 53") != std::string::npos, rules);
}

BOOST_AUTO_TEST_CASE(dns_goes_to_slirp_and_resolv_conf_is_there_only_with_network) {
  auto on = PostRun(R"({"network": true, "language": "bash", "code": "cat /etc/resolv.conf"})");
  BOOST_TEST(Str(on, "stdout") == "nameserver 10.0.2.3\n");
  auto off = PostRun(R"({"language": "bash", "code": "cat /etc/resolv.conf; ip -o link | wc -l"})");
  BOOST_TEST(Str(off, "stdout").find("nameserver") == std::string::npos, Str(off, "stdout"));
}

// tests/data/network_cases/runs.jsonl (its README.md says what the keys mean).
BOOST_AUTO_TEST_CASE(network_cases_pass) {
  (void)Net();
  std::ifstream in(std::string(SANDRUN_SOURCE_DIR) + "/tests/data/network_cases/runs.jsonl");
  BOOST_TEST_REQUIRE(in.good());
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    rapidjson::Document c;
    c.Parse(line.c_str());
    BOOST_TEST_REQUIRE((!c.HasParseError() && c.IsObject()), line);
    const std::string name = Str(c, "name");
    BOOST_TEST_CONTEXT("case " << name) {
      ++cases;
      rapidjson::StringBuffer body;
      rapidjson::Writer<rapidjson::StringBuffer> w(body);
      c["request"].Accept(w);
      auto doc = PostRun(body.GetString());
      const rapidjson::Value& e = c["expect"];
      const std::string out = Output(doc);
      if (e.HasMember("status")) BOOST_TEST(Str(doc, "status") == Str(e, "status"), out);
      for (const char* key : {"output_contains", "output_not_contains"}) {
        if (!e.HasMember(key)) continue;
        const bool want = std::string(key) == "output_contains";
        for (const auto& s : e[key].GetArray()) {
          BOOST_TEST((out.find(s.GetString()) != std::string::npos) == want,
                     key << ": " << s.GetString() << "\n"
                         << out);
        }
      }
      std::vector<std::string> exported;
      for (const auto& f : doc["files"].GetArray()) exported.push_back(Str(f, "path"));
      if (e.HasMember("files_exported")) {
        for (const auto& want : e["files_exported"].GetArray()) {
          BOOST_TEST(
              (std::find(exported.begin(), exported.end(), want.GetString()) != exported.end()),
              "not exported: " << want.GetString());
        }
      }
      if (e.HasMember("files_not_exported")) {
        for (const auto& prefix : e["files_not_exported"].GetArray()) {
          for (const auto& path : exported) {
            BOOST_TEST(path.rfind(prefix.GetString(), 0) != 0, "exported: " << path);
          }
        }
      }
      if (e.HasMember("max_files_skipped")) {
        BOOST_TEST(doc["files_skipped"].Size() <= e["max_files_skipped"].GetUint(), out);
      }
    }
  }
  BOOST_TEST(cases == 2);
}

// A run's connections to a server that never reads (fake_internet.py's sink): the run's
// sockets and sandrun-slirp's host sockets for it stay within the run's memory_mb (it is
// in the run's memory cgroup, whose kmem.tcp limit counts both), and when the run ends every
// connection is reset (sock_diag SOCK_DESTROY), not left as orphans retransmitting for ~15
// minutes: the host's socket memory is back and the sink holds no connection within 5 s.
BOOST_AUTO_TEST_CASE(a_runs_connections_stay_within_its_memory_and_are_reset_when_it_ends) {
  const FakeInternet& net = Net();
  const std::string sink_count = net.S("dir") + "/sink.count";
  const long long memory_mb = 32;
  const int64_t left_bound = memory_mb * 256;
  const int64_t baseline = SocketPages();
  // 2 processes x 24 connections, 160 MiB at most: 8 MiB of buffers each without a bound. With
  // sandrun-slirp's host socket for each, past the socket cap (64 for memory_mb 32).
  SocketPeakSampler sampler;
  auto doc =
      RunWithProbe("./probe sockfill remote 2 24 " + std::to_string(5 * memory_mb) + " " +
                       net.S("index") + " " + std::to_string(net.topology["sink_port"].GetInt()),
                   R"("network": true, "limits": {"memory_mb": )" + std::to_string(memory_mb) +
                       R"(, "wall_time_s": 60})");
  const long long cgroup_peak = sampler.Stop();
  const std::string out = Output(doc);
  const SockFill f = ParseSockFill(out);
  const long long peak_bound = SocketPeakBound(memory_mb);
  const int64_t left = SocketPagesLeftAfter(baseline, left_bound / 8, 5.0);
  std::string held = "?";
  for (int i = 0; i < 50; ++i) {
    held = ReadFile(sink_count);
    if (held == "0") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  BOOST_TEST_MESSAGE("remote: status "
                     << Str(doc, "status") << ", " << f.sockets << " connections, written "
                     << (f.written >> 20) << " MiB (first error " << f.first_error
                     << "), sockets' buffers " << (f.kernel >> 10) << " KiB, run cgroup's peak "
                     << (cgroup_peak >> 10) << " KiB, host growth (all stacks) "
                     << (f.HostBytes() >> 10) << " KiB (bound " << (peak_bound >> 10)
                     << " KiB), host pages left after " << left << " (bound " << left_bound
                     << "), sink holds " << held);
  BOOST_TEST_REQUIRE(f.found, out);
  BOOST_TEST(f.sockets >= 8, out);  // the connections were made
  BOOST_TEST(f.kernel <= peak_bound, out);
  BOOST_TEST(cgroup_peak > 0);
  BOOST_TEST(cgroup_peak <= peak_bound);
  BOOST_TEST(left <= left_bound);
  BOOST_TEST(held == "0");
}

// Connections the run resets while the network is full: sandrun-slirp closes its host sockets
// for them during the run, with their data still unsent to a peer that never reads (the
// fake internet's sink). Those are orphans no process holds; sandrun-slirp records them as it
// closes them, and when the run ends they are destroyed with the rest: the sink holds no
// connection within 5 s (before: each orphan retransmitted to it for minutes).
BOOST_AUTO_TEST_CASE(host_sockets_closed_during_the_run_do_not_outlive_it) {
  const FakeInternet& net = Net();
  const std::string sink_count = net.S("dir") + "/sink.count";
  const std::string code =
      "import socket, struct, time\nsocks = []\nfor i in range(8):\n"
      "  s = socket.create_connection((" +
      Q(net.S("index")) + ", " + std::to_string(net.topology["sink_port"].GetInt()) +
      "), timeout=3)\n  s.setblocking(False)\n  sent = 0\n  try:\n"
      "    while sent < (4 << 20):\n      sent += s.send(b'x' * 65536)\n"
      "  except BlockingIOError:\n    pass\n  socks.append(s)\n"
      "time.sleep(1)\n"
      "for s in socks:\n"
      "  s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))\n"
      "  s.close()\n"
      "time.sleep(2)\nprint('reset', len(socks))\n";
  auto doc = PostRun(R"({"network": true, "language": "python", "limits": {"wall_time_s": 30},)"
                     R"( "code": )" +
                     Q(code) + "}");
  BOOST_TEST_REQUIRE(Str(doc, "stdout") == "reset 8\n", Output(doc));
  std::string held = "?";
  for (int i = 0; i < 50; ++i) {
    held = ReadFile(sink_count);
    if (held == "0") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  BOOST_TEST_MESSAGE("connections the sink holds 5 s after the run: " << held);
  BOOST_TEST(held == "0");
}

// The run's user-mode network is the run's: sandrun-slirp runs as the stack's network_uid
// (not the sandbox uid that owns every sandbox's user namespace), in the run's memory cgroup
// (its memory and socket buffers are charged there), with at most 512 fds (not the daemon's
// 20 000), in the host's namespaces (it holds the run's tap, it never joined the run's).
BOOST_AUTO_TEST_CASE(sandrun_slirp_runs_as_the_network_uid_in_the_runs_memory_cgroup) {
  const std::string uid = std::to_string(Stack::Get().network_uid());
  const std::string sandbox_uid = std::to_string(Stack::Get().sandbox_uid());
  auto run = std::async(std::launch::async, [] {
    return PostRun(R"({"network": true, "language": "bash", "code": "sleep 6"})");
  });
  std::string pid;
  for (int i = 0; i < 100 && pid.empty(); ++i) {
    pid = Shell("pgrep -u " + uid + " -x sandrun-slirp | head -1");
    while (!pid.empty() && pid.back() == '\n') pid.pop_back();
    if (pid.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  BOOST_TEST_REQUIRE(!pid.empty(), "no sandrun-slirp of uid " << uid << " seen");
  const std::string cgroups = ReadFile("/proc/" + pid + "/cgroup");
  const std::string limits = Shell("grep 'Max open files' /proc/" + pid + "/limits");
  const std::string ids = Shell("grep -E '^(Uid|Gid|Groups|Seccomp):' /proc/" + pid + "/status");
  const std::string userns = Shell("readlink /proc/" + pid + "/ns/user /proc/" + pid + "/ns/net");
  const std::string host_ns = Shell("readlink /proc/self/ns/user /proc/self/ns/net");
  const std::string sandbox_procs = Shell("pgrep -u " + sandbox_uid + " -x sandrun-slirp");
  (void)run.get();
  std::string memory_line;
  for (size_t at = 0; at < cgroups.size();) {
    const size_t end = cgroups.find('\n', at);
    const std::string line = cgroups.substr(at, end - at);
    // v1: the memory hierarchy's line; v2 (no such line): the unified one.
    if (line.find(":memory:") != std::string::npos) memory_line = line;
    if (line.rfind("0::", 0) == 0 && cgroups.find(":memory:") == std::string::npos) {
      memory_line = line;
    }
    at = end == std::string::npos ? cgroups.size() : end + 1;
  }
  BOOST_TEST_MESSAGE("sandrun-slirp " << pid << ": " << memory_line << "; " << limits << ids);
  // A run's cgroup is <stack's cgroup_name>/<run id> (v2: .../runs/<run id>).
  const std::string name = Stack::Get().cgroup_name() + "/";
  const size_t at = memory_line.find(name);
  BOOST_TEST(at != std::string::npos, memory_line);
  if (at != std::string::npos) {
    const std::string below = memory_line.substr(at + name.size());
    BOOST_TEST((!below.empty() && below != "daemon"), memory_line);
  }
  BOOST_TEST(limits.find(" 512 ") != std::string::npos, limits);
  const std::string u = "\t" + uid;
  BOOST_TEST(ids.find("Uid:" + u + u + u + u + "\n") != std::string::npos, ids);
  BOOST_TEST(ids.find("Gid:" + u + u + u + u + "\n") != std::string::npos, ids);
  BOOST_TEST((ids.find("Groups:\t\n") != std::string::npos ||
              ids.find("Groups:\t \n") != std::string::npos),
             ids);
  BOOST_TEST(ids.find("Seccomp:\t2") != std::string::npos, ids);
  BOOST_TEST(userns == host_ns, userns << " vs the host's " << host_ns);
  BOOST_TEST(sandbox_procs.empty());
}

BOOST_AUTO_TEST_CASE(nothing_of_the_network_outlives_its_run) {
  (void)PostRun(R"({"network": true, "language": "bash", "code": "true"})");
  const std::string uid = std::to_string(Stack::Get().network_uid());
  // The run's sandrun-slirp exits as its run ends: polled, 5 s at most.
  std::string left = Shell("pgrep -u " + uid + " -x sandrun-slirp");
  for (int i = 0; i < 250 && !left.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    left = Shell("pgrep -u " + uid + " -x sandrun-slirp");
  }
  BOOST_TEST(left.empty(), "sandrun-slirp left: " << left);
}

// A stateful run's kernel starts with the network its first run asks for; a later run of
// the session that asks otherwise gets a new kernel (restarted, said in stderr). Last in the
// suite: the kernel it leaves has the network (and its sandrun-slirp) until the stack stops.
// pip runs as a %%bash cell (bash runs of a stateful session): `%pip` and `!cmd` need a pty,
// which the sandbox has not.
BOOST_AUTO_TEST_CASE(a_stateful_runs_kernel_has_the_network_its_run_asks_for) {
  const FakeInternet& net = Net();
  const std::string session = "net-kernel-" + std::to_string(::getpid());
  const std::string uid = std::to_string(Stack::Get().network_uid());
  auto stateful = [&](bool network, const std::string& language, const std::string& code) {
    return PostRun(std::string(R"({"stateful": true, "network": )") + (network ? "true" : "false") +
                   R"(, "session": )" + Q(session) + R"(, "language": )" + Q(language) +
                   R"(, "limits": {"wall_time_s": 60}, "code": )" + Q(code) + "}");
  };
  const std::string fetch =
      "import urllib.request\ntry:\n  print('index', urllib.request.urlopen('http://" +
      net.S("index") +
      "/simple/', timeout=3).status)\nexcept Exception as e:\n  print('unreachable', "
      "type(e).__name__)\n";
  const std::string mod = net.S("module");

  auto on = stateful(true, "python", fetch + "x = 1\n");
  BOOST_TEST(Str(on, "status") == "ok", Output(on));
  BOOST_TEST(KernelStatus(on) == "started");
  BOOST_TEST(Str(on, "stdout") == "index 200\n", Output(on));
  BOOST_TEST(!Shell("pgrep -u " + uid + " -x sandrun-slirp").empty());
  auto install = stateful(true, "bash", "pip install " + net.S("package"));
  BOOST_TEST(Str(install, "status") == "ok", Output(install));
  BOOST_TEST(KernelStatus(install) == "kept");
  BOOST_TEST(Str(install, "stdout").find("Successfully installed") != std::string::npos,
             Output(install));
  BOOST_TEST_REQUIRE(install.HasMember("usage"), Output(install));
  BOOST_TEST(Int(install["usage"], "net_rx_bytes") > 1000, Output(install));

  // Without the network: a new kernel (the variables are gone, the session's files are
  // kept: what pip installed imports), which cannot reach the index.
  auto off =
      stateful(false, "python",
               fetch + "print('x' in globals())\nimport " + mod + "\nprint(" + mod + ".VALUE)\n");
  BOOST_TEST(Str(off, "status") == "ok", Output(off));
  BOOST_TEST(KernelStatus(off) == "restarted");
  BOOST_TEST(Str(off, "stderr")
                     .find("sandrun: a new kernel: the kernel was restarted because this "
                           "run asks for the network off") != std::string::npos,
             Output(off));
  BOOST_TEST(Str(off, "stdout") == "unreachable URLError\nFalse\n" + net.S("value") + "\n",
             Output(off));
  BOOST_TEST_REQUIRE(off.HasMember("usage"), Output(off));
  BOOST_TEST(!off["usage"].HasMember("net_rx_bytes"));
  BOOST_TEST(Shell("pgrep -u " + uid + " -x sandrun-slirp").empty());  // ended with its kernel

  // Same network: the kernel is kept; pip finds nothing and says the run has no network
  // (this server gives it on request).
  auto pip = stateful(false, "bash", "pip install sandrun-not-on-this-host");
  BOOST_TEST(KernelStatus(pip) == "kept");
  BOOST_TEST(Str(pip, "stderr").find("this run has no network") != std::string::npos, Output(pip));
  BOOST_TEST(
      Str(pip, "stderr").find("Not available: sandrun-not-on-this-host.") != std::string::npos,
      Output(pip));

  auto again = stateful(true, "python", fetch + "print('x' in globals())\n");
  BOOST_TEST(KernelStatus(again) == "restarted");
  BOOST_TEST(
      Str(again, "stderr").find("because this run asks for the network on") != std::string::npos,
      Output(again));
  BOOST_TEST(Str(again, "stdout") == "index 200\nFalse\n", Output(again));
}

// An install step may write files past the program's file_size_mb (10 MiB): a wheel from the
// index whose package holds a 12 MiB file (numpy's own .so files are of that size) installs
// and imports. A wheel of the workspace is no index package: its install is the program's
// (fake_internet.py's sandrun-big is the same package).
BOOST_AUTO_TEST_CASE(an_install_step_writes_files_past_the_programs_file_size_limit) {
  const FakeInternet& net = Net();
  const std::string check =
      Q("import os, sandrun_big\n"
        "print(os.path.getsize(os.path.join(os.path.dirname(sandrun_big.__file__), "
        "'data.bin')))\n");
  auto doc =
      PostRun(R"({"network": true, "snippets": [{"language": "bash", "code": "pip install )" +
              net.S("big_package") + R"("}, {"language": "python", "code": )" + check + "}]}");
  BOOST_TEST(Str(doc, "status") == "ok", Output(doc));
  BOOST_TEST_REQUIRE(doc.HasMember("snippets"), Output(doc));
  BOOST_TEST_REQUIRE(doc["snippets"].Size() == 2u, Output(doc));
  BOOST_TEST(Str(doc["snippets"][0], "budget") == "install");
  BOOST_TEST(Str(doc["snippets"][1], "stdout") == "12582912\n", Output(doc));
  const std::string make_wheel =
      "import urllib.request\n"
      "urllib.request.urlretrieve('http://" +
      net.S("index") + "/simple/" + net.S("big_package") +
      "/sandrun_big-1.0-py3-none-any.whl', 'sandrun_big-1.0-py3-none-any.whl')\n";
  auto local = PostRun(
      R"({"network": true, "snippets": [{"language": "python", "code": )" + Q(make_wheel) +
      R"(}, {"language": "bash", "code": "pip install --no-index sandrun_big-1.0-py3-none-any.whl"}]})");
  BOOST_TEST_REQUIRE(local.HasMember("snippets"), Output(local));
  BOOST_TEST_REQUIRE(local["snippets"].Size() == 2u, Output(local));
  BOOST_TEST(Str(local["snippets"][1], "budget") == "program");
  BOOST_TEST(Str(local, "status") != "ok", Output(local));  // 12 MiB past file_size_mb
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(NetworkOff)

BOOST_AUTO_TEST_CASE(a_stateful_run_asking_for_the_network_is_forbidden) {
  auto r = Post("/run", R"({"stateful": true, "network": true, "session": "s", "code": "1"})");
  BOOST_TEST(r.status == 403);
  BOOST_TEST(ParseServiceError(r.body).code == "network_forbidden");
}

BOOST_AUTO_TEST_CASE(a_request_for_the_network_is_forbidden) {
  auto r = Post("/run", R"({"network": true, "language": "bash", "code": "true"})");
  BOOST_TEST(r.status == 403);
  auto e = ParseServiceError(r.body);
  BOOST_TEST(e.code == "network_forbidden");
  BOOST_TEST(e.field == "network");
}

BOOST_AUTO_TEST_CASE(an_install_of_a_missing_package_says_the_network_is_off) {
  const auto start = Clock::now();
  auto doc =
      PostRun(R"({"markdown": "```bash\npip install numpy sandrun-not-on-this-host\n```\n"})");
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  const std::string err = Str(doc, "stderr");
  BOOST_TEST(ms < 10000, ms << " ms");
  BOOST_TEST_MESSAGE("install without network answered in " << ms << " ms");
  BOOST_TEST(err.find("the network is off for runs on this server") != std::string::npos, err);
  BOOST_TEST(err.find("Already available: numpy.") != std::string::npos, err);
  BOOST_TEST(err.find("Not available: sandrun-not-on-this-host.") != std::string::npos, err);
  for (const char* fix : {"\"network\"", "\"pip_index_url\"", "environments_prebuild"}) {
    BOOST_TEST(err.find(fix) != std::string::npos, fix);
  }
}

BOOST_AUTO_TEST_CASE(an_installed_package_is_already_satisfied) {
  auto doc = PostRun(R"({"markdown": "```bash\npip install numpy\n```\n"})");
  BOOST_TEST(Str(doc, "status") == "ok", Output(doc));
  BOOST_TEST(Str(doc, "stdout").find("Requirement already satisfied: numpy") != std::string::npos);
  BOOST_TEST(Str(doc, "stderr").find("network is off") == std::string::npos);
}

// A shell program that also installs gets the program's budget, not the install budget (a
// `pip install` line must not buy 300 s of CPU), and still gets the network-off note.
BOOST_AUTO_TEST_CASE(a_program_with_an_install_line_runs_on_the_program_budget) {
  // 10 s of wall time: pip's own start (it reports numpy present) takes 1-3 s on a loaded
  // machine, and the loop must then be seen spinning. On the install budget (300 s) the run
  // would last minutes; on the program's it ends at 10 s.
  auto doc = PostRun(R"({"language": "bash", "limits": {"wall_time_s": 10}, "code": )" +
                     Q("pip install numpy\necho spinning\nwhile :; do :; done\n") + "}");
  BOOST_TEST(Str(doc, "status") == "timeout", Output(doc));
  BOOST_TEST(Str(doc, "stdout").find("spinning") != std::string::npos, Output(doc));
  BOOST_TEST(doc["usage"]["wall_ms"].GetInt64() < 60000, Output(doc));
  BOOST_TEST(!doc.HasMember("snippets"));
  // The shape of hostile case net-05: pip's failure hidden behind a pipe, the script ends 0.
  auto missing = PostRun(R"({"language": "bash", "code": )" +
                         Q("pip install sandrun-not-on-this-host 2>&1 | tail -n 3\n"
                           "echo \"pip exit: ${PIPESTATUS[0]}\"\n") +
                         "}");
  BOOST_TEST(Str(missing, "status") == "ok", Output(missing));
  BOOST_TEST(Str(missing, "stdout").find("pip exit: 1") != std::string::npos, Output(missing));
  BOOST_TEST(Str(missing, "stderr").find("the network is off for runs on this server") !=
                 std::string::npos,
             Output(missing));
}

// A Python program sent as `code` (the Tool's run_python, stateless) with notebook pip lines:
// they run first on the install budget, as in a markdown block, not as a SyntaxError.
BOOST_AUTO_TEST_CASE(pip_lines_of_a_python_program_run_first) {
  auto doc = PostRun(R"({"language": "python", "code": )" +
                     Q("!pip install numpy\nimport numpy\nprint('np', numpy.__name__)\n") + "}");
  BOOST_TEST(Str(doc, "status") == "ok", Output(doc));
  BOOST_TEST(Str(doc, "stdout").find("Requirement already satisfied: numpy") != std::string::npos,
             Output(doc));
  BOOST_TEST(Str(doc, "stdout").find("np numpy\n") != std::string::npos, Output(doc));
  BOOST_TEST_REQUIRE(doc.HasMember("snippets"), Output(doc));
  BOOST_TEST_REQUIRE(doc["snippets"].Size() == 2u);
  BOOST_TEST(Str(doc["snippets"][0], "budget") == "install");
  BOOST_TEST(Str(doc["snippets"][1], "budget") == "program");
  auto missing = PostRun(R"({"language": "python", "code": )" +
                         Q("%pip install sandrun-not-on-this-host\nprint('never')\n") + "}");
  BOOST_TEST(Str(missing, "status") == "error", Output(missing));
  BOOST_TEST(Str(missing, "stderr").find("the network is off for runs on this server") !=
                 std::string::npos,
             Output(missing));
  BOOST_TEST(Str(missing, "stdout").find("never") == std::string::npos, Output(missing));
}

// Without network a run still has its own loopback, up (servers and clients of its own:
// asyncio, test servers, multiprocessing managers), and nothing else: no other interface, no
// route, and no capability over the namespace (it was made ahead by the daemon and is owned
// by the host's user namespace: sandbox/net_namespace_pool.h).
BOOST_AUTO_TEST_CASE(a_run_has_its_own_loopback_and_nothing_else) {
  const std::string code =
      "import fcntl, socket, struct\n"
      "for family, host in ((socket.AF_INET, '127.0.0.1'), (socket.AF_INET6, '::1')):\n"
      "    server = socket.socket(family)\n"
      "    server.bind((host, 0))\n"
      "    server.listen()\n"
      "    socket.create_connection(server.getsockname()[:2], timeout=2).sendall(b'hi')\n"
      "    print(host, server.accept()[0].recv(2).decode())\n"
      "print('interfaces', [l.split(':')[0].strip() for l in "
      "open('/proc/net/dev').readlines()[2:]])\n"
      "print('routes', len(open('/proc/net/route').readlines()) - 1)\n"
      "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
      "request = struct.pack('16sh', b'lo', 0)\n"
      "try:\n"
      "    fcntl.ioctl(s, 0x8914, request)  # SIOCSIFFLAGS: lo down\n"
      "    print('lo down')\n"
      "except OSError as e:\n"
      "    print('ioctl', e.errno)\n"
      "try:\n"
      "    open('/proc/sys/net/ipv4/ip_forward', 'w').write('1')\n"
      "    print('sysctl written')\n"
      "except OSError as e:\n"
      "    print('sysctl', e.errno)\n";
  auto doc = PostRun(RunRequest("python", code));
  BOOST_TEST(Str(doc, "status") == "ok", Output(doc));
  BOOST_TEST(Str(doc, "stdout") ==
                 "127.0.0.1 hi\n::1 hi\ninterfaces ['lo']\nroutes 0\nioctl 1\nsysctl 13\n",
             Output(doc));
  // Its 127.0.0.1 is not the host's: the nginx in front of this very daemon listens there.
  auto host = PostRun(RunRequest("python",
                                 "import socket\ntry:\n    socket.create_connection(("
                                 "'127.0.0.1', " +
                                     std::to_string(Stack::Get().port()) +
                                     "), timeout=2)\n    print('reached the host')\n"
                                     "except ConnectionRefusedError:\n"
                                     "    print('refused')\n"));
  BOOST_TEST(Str(host, "stdout") == "refused\n", Output(host));
}

// Two runs at once never share a loopback: one listens for 6 s on a fixed port, the other
// tries that port for 3 s (from 0.5 s after the first started) and is refused every time.
BOOST_AUTO_TEST_CASE(runs_at_the_same_time_do_not_share_a_loopback) {
  const std::string listen =
      "import socket\n"
      "server = socket.socket()\n"
      "server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
      "server.bind(('127.0.0.1', 45813))\n"
      "server.listen()\n"
      "server.settimeout(6)\n"
      "try:\n"
      "    server.accept()\n"
      "    print('accepted')\n"
      "except socket.timeout:\n"
      "    print('nobody came')\n";
  const std::string knock =
      "import socket, time\n"
      "end = time.monotonic() + 3\n"
      "refused = 0\n"
      "while time.monotonic() < end:\n"
      "    try:\n"
      "        socket.create_connection(('127.0.0.1', 45813), timeout=1)\n"
      "        print('connected')\n"
      "        break\n"
      "    except ConnectionRefusedError:\n"
      "        refused += 1\n"
      "        time.sleep(0.05)\n"
      "print('refused' if refused > 10 else 'too few tries: %d' % refused)\n";
  auto listener = std::async(std::launch::async, [&] {
    return PostRun(RunRequest("python", listen, {{"wall_time_s", 15}}));
  });
  // The listener listens: a process of the sandbox uid has 127.0.0.1:45813 (B2F5) in state
  // LISTEN (0A) in its network namespace's table. Polled, 15 s at most.
  const std::string listening =
      "for p in $(pgrep -u " + std::to_string(Stack::Get().sandbox_uid()) +
      "); do grep -q ' 0100007F:B2F5 00000000:0000 0A ' /proc/$p/net/tcp 2>/dev/null && "
      "echo $p; done";
  bool heard = false;
  for (int i = 0; i < 150 && !heard; ++i) {
    heard = !Shell(listening).empty();
    if (!heard) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  BOOST_TEST_REQUIRE(heard, "the listening run never listened");
  auto knocker = PostRun(RunRequest("python", knock, {{"wall_time_s", 15}}));
  auto listened = listener.get();
  BOOST_TEST(Str(knocker, "stdout") == "refused\n", Output(knocker));
  BOOST_TEST(Str(listened, "stdout") == "nobody came\n", Output(listened));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
