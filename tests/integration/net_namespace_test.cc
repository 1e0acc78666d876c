// Network namespaces kept for their user (sandbox/net_namespace_pool.h): after a run without
// network its namespace goes back to the pool and may serve the next run of the same user
// when the run left it as new. This suite's stack has the zygote on
// and no warm pool ({"zygote": true, "pool": {}}: every run takes its namespace from the pool
// when it starts), no anonymous access, two bound tokens and a front end's.
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "helpers.h"
#include "host_state.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

constexpr char kUserA[] = "tok-netns-a-0123456789abcdef";   // user=netns-a
constexpr char kUserB[] = "tok-netns-b-0123456789abcdef";   // user=netns-b
constexpr char kFront[] = "tok-netns-fe-0123456789abcdef";  // front_end

int64_t Checked() { return NetNamespaceCount("recycled") + NetNamespaceCount("discarded"); }

// Waits until the daemon has checked `n` namespaces given back after runs (kept or let go):
// the check runs on the pool's thread after the answer.
void AwaitChecked(int64_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (Checked() < n) {
    BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline,
                          "no namespace checked after a run within 30 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a poll, bounded above
  }
}

// POST /run of `body` with `token` (and X-Sandrun-User `header_user` unless empty); its answer.
rapidjson::Document PostAs(const char* token, const std::string& body,
                           const std::string& header_user = "") {
  httplib::Client client("127.0.0.1", Stack::Get().port());
  client.set_read_timeout(90, 0);
  httplib::Headers headers{{"Authorization", std::string("Bearer ") + token}};
  if (!header_user.empty()) headers.emplace("X-Sandrun-User", header_user);
  const HttpResponse r =
      FromResult(client.Post("/run", headers, body, "application/json"), "POST /run");
  BOOST_REQUIRE_MESSAGE(r.status == 200, r.body);
  return ParseJson(r.body);
}

// A Python run with `token` (and X-Sandrun-User `header_user` unless empty) printing its
// network namespace's inode, then `more`'s output.
std::string NetRun(const char* token, const std::string& more = "",
                   const std::string& header_user = "") {
  const std::string code = "import os\nprint(os.stat('/proc/self/ns/net').st_ino)\n" + more;
  rapidjson::Document doc =
      PostAs(token, "{\"language\": \"python\", \"code\": " + Q(code) + "}", header_user);
  BOOST_TEST(Str(doc, "status") == "ok", Str(doc, "stderr"));
  return Str(doc, "stdout");
}

// Every file under the run's /proc/net, path (below /proc/net) -> text, as a run of
// front-end user `user` reads it.
std::map<std::string, std::string> ProcNet(const std::string& user) {
  const std::string code =
      "import json, os\n"
      "out = {}\n"
      "for root, dirs, files in os.walk('/proc/net'):\n"
      "    for f in files:\n"
      "        p = os.path.join(root, f)\n"
      "        try:\n"
      "            out[p[len('/proc/net/'):]] = open(p).read()\n"
      "        except OSError as e:\n"
      "            out[p[len('/proc/net/'):]] = 'unreadable: ' + os.strerror(e.errno)\n"
      "print(json.dumps(out))\n";
  rapidjson::Document doc =
      PostAs(kFront, R"({"language": "python", "code": )" + Q(code) + "}", user);
  BOOST_REQUIRE_MESSAGE(Str(doc, "status") == "ok", Str(doc, "stderr"));
  rapidjson::Document files = ParseJson(Str(doc, "stdout"));
  BOOST_REQUIRE(files.IsObject());
  std::map<std::string, std::string> out;
  for (const auto& m : files.GetObject()) out[m.name.GetString()] = m.value.GetString();
  return out;
}

// `text` of /proc/net/`path` without what is not the namespace's own state: the kernel's
// netlink sockets' addresses and inodes (each namespace has its own), the memory all
// namespaces' sockets take together (sockstat's `mem`, protocols' memory column), and
// rt6_stats' last field (routes discarded: the loopback's restart before a namespace is kept
// counts there; docs/DESIGN.md says so).
std::string Comparable(const std::string& path, const std::string& text) {
  std::istringstream lines(text);
  std::string out;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream in(line);
    std::vector<std::string> f{std::istream_iterator<std::string>(in), {}};
    if (path == "netlink" && f.size() > 2) {
      f = std::vector<std::string>(f.begin() + 1, f.end() - 1);
    } else if ((path == "sockstat" || path == "sockstat6")) {
      for (size_t i = 0; i + 1 < f.size(); ++i) {
        if (f[i] == "mem") f[i + 1] = "-";
      }
    } else if (path == "protocols" && f.size() > 3) {
      f[3] = "-";
    } else if (path == "rt6_stats" && !f.empty()) {
      f.pop_back();
    }
    for (const auto& field : f) out += field + " ";
    out += "\n";
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(NetNamespaces)

// A clean namespace serves its user's next run, and not another user's; after a run that
// leaves a loopback connection in TIME_WAIT it goes, and the same user's next run sees none of
// it (no TIME_WAIT, no connection counted).
BOOST_AUTO_TEST_CASE(a_network_namespace_serves_its_user_again_only_as_new) {
  const std::string kLeaveTimeWait =
      "import socket\n"
      "l = socket.create_server(('127.0.0.1', 0))\n"
      "c = socket.create_connection(l.getsockname())\n"
      "a, _ = l.accept(); a.close(); c.recv(1); c.close(); l.close()\n"
      "t = open('/proc/net/sockstat').read().split(); print(t[t.index('tw') + 1])\n";
  const std::string kLook =
      "t = open('/proc/net/sockstat').read().split(); print(t[t.index('tw') + 1])\n"
      "snmp = [l.split() for l in open('/proc/net/snmp') if l.startswith('Tcp:')]\n"
      "print(dict(zip(snmp[0], snmp[1]))['ActiveOpens'])\n";
  const int64_t checked = Checked();
  const int64_t reused = NetNamespaceCount("reused");
  const std::string first = Line(NetRun(kUserA), 0);
  AwaitChecked(checked + 1);
  const std::string dirty = NetRun(kUserA, kLeaveTimeWait);
  BOOST_TEST(Line(dirty, 0) == first, "the same user's clean namespace again");
  BOOST_TEST(Line(dirty, 1) == "1", "the connection is in TIME_WAIT: " << dirty);
  BOOST_TEST(NetNamespaceCount("reused") > reused);
  AwaitChecked(checked + 2);
  const int64_t discarded = NetNamespaceCount("discarded");
  const std::string after = NetRun(kUserA, kLook);
  BOOST_TEST(Line(after, 1) == "0", "no TIME_WAIT left from the run before: " << after);
  BOOST_TEST(Line(after, 2) == "0", "no connection counted from the run before: " << after);
  BOOST_TEST(discarded >= 1);
  AwaitChecked(checked + 3);  // `after` read files only: kept for netns-a
  const std::string other = NetRun(kUserB, kLook);
  BOOST_TEST(Line(other, 0) != Line(after, 0), "another user's run never gets netns-a's");
  BOOST_TEST(Line(NetRun(kUserA), 0) == Line(after, 0));
}

// A front end names its users in X-Sandrun-User: each has namespaces of their own, as they
// have sessions and files of their own; one user's kept namespace serves that user's next
// run and not the other's.
BOOST_AUTO_TEST_CASE(a_front_ends_users_have_namespaces_of_their_own) {
  const int64_t checked = Checked();
  const std::string first = Line(NetRun(kFront, "", "fe-user-1"), 0);
  AwaitChecked(checked + 1);
  const std::string other = Line(NetRun(kFront, "", "fe-user-2"), 0);
  BOOST_TEST(other != first, "fe-user-2 never gets fe-user-1's");
  BOOST_TEST(Line(NetRun(kFront, "", "fe-user-1"), 0) == first);
}

// What the hostile cases of the network (tests/data/hostile_cases, net_*, none with the
// network on) leave in a namespace never reaches the same user's next run: after each, a run
// of that user reads every file of /proc/net; when it was given a kept namespace, each file
// that two new namespaces (one before the cases, one after) show alike must read the same
// there too (Comparable). Global files (per-CPU packet counts) differ between the two new
// ones and are left out. At least one case must have left its namespace kept, else nothing was
// compared.
BOOST_AUTO_TEST_CASE(hostile_network_cases_leave_nothing_for_the_users_next_run) {
  const std::map<std::string, std::string> before = ProcNet("netns-fresh-1");
  std::ifstream in(std::string(SANDRUN_SOURCE_DIR) + "/tests/data/hostile_cases/runs.jsonl");
  BOOST_TEST_REQUIRE(in.good());
  std::vector<std::pair<std::string, std::map<std::string, std::string>>> kept;
  int cases = 0;
  for (std::string line; std::getline(in, line);) {
    rapidjson::Document c = ParseJson(line);
    const std::string name = Str(c, "name");
    if (name.rfind("net_", 0) != 0 || c["request"].HasMember("network")) continue;
    ++cases;
    rapidjson::StringBuffer body;
    rapidjson::Writer<rapidjson::StringBuffer> w(body);
    c["request"].Accept(w);
    const int64_t checked = Checked();
    (void)PostAs(kFront, body.GetString(), "netns-hostile");
    AwaitChecked(checked + 1);
    const int64_t reused = NetNamespaceCount("reused");
    auto files = ProcNet("netns-hostile");
    if (NetNamespaceCount("reused") > reused) kept.emplace_back(name, std::move(files));
    AwaitChecked(checked + 2);
  }
  BOOST_TEST(cases >= 6, "the net_ cases without network");
  BOOST_TEST(!kept.empty(), "no case left its namespace kept: nothing compared");
  const std::map<std::string, std::string> after = ProcNet("netns-fresh-2");
  int compared = 0;
  std::string left_out;
  for (const auto& [path, text] : before) {
    auto again = after.find(path);
    if (again == after.end() || Comparable(path, again->second) != Comparable(path, text)) {
      left_out += " " + path;
      continue;
    }
    ++compared;
    for (const auto& [name, files] : kept) {
      auto seen = files.find(path);
      BOOST_TEST_CONTEXT("after " << name << ", /proc/net/" << path) {
        BOOST_TEST_REQUIRE((seen != files.end()));
        BOOST_TEST(Comparable(path, seen->second) == Comparable(path, text), "kept:\n"
                                                                                 << seen->second
                                                                                 << "\nnew:\n"
                                                                                 << text);
      }
    }
  }
  BOOST_TEST_MESSAGE(kept.size() << " of " << cases << " cases were followed by a kept namespace; "
                                 << compared << " of " << before.size()
                                 << " files compared; left out:" << left_out);
  BOOST_TEST(compared >= 50, "files alike in two new namespaces: " << compared);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
