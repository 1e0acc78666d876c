// Network namespaces kept for their user (sandbox/net_namespace_pool.h): after a run without
// network its namespace goes back to the pool and may serve the next run of the same user
// when the run left it as new. This suite's stack has the zygote on
// and no warm pool ({"zygote": true, "pool": {}}: every run takes its namespace from the pool
// when it starts), no anonymous access, two bound tokens and a front end's.
#include <boost/test/unit_test.hpp>
#include <chrono>
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

// A Python run with `token` (and X-Sandrun-User `header_user` unless empty) printing its
// network namespace's inode, then `more`'s output.
std::string NetRun(const char* token, const std::string& more = "",
                   const std::string& header_user = "") {
  httplib::Client client("127.0.0.1", Stack::Get().port());
  client.set_read_timeout(60, 0);
  httplib::Headers headers{{"Authorization", std::string("Bearer ") + token}};
  if (!header_user.empty()) headers.emplace("X-Sandrun-User", header_user);
  const std::string code = "import os\nprint(os.stat('/proc/self/ns/net').st_ino)\n" + more;
  const HttpResponse r = FromResult(
      client.Post("/run", headers, "{\"language\": \"python\", \"code\": " + Q(code) + "}",
                  "application/json"),
      "POST /run");
  BOOST_REQUIRE_MESSAGE(r.status == 200, r.body);
  rapidjson::Document doc = ParseJson(r.body);
  BOOST_TEST(Str(doc, "status") == "ok", Str(doc, "stderr"));
  return Str(doc, "stdout");
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

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
