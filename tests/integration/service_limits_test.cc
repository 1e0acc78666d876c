// The service's own resources under hostile load, through the real nginx:
// FastCGI worker threads, daemon memory, nginx connections. The ServiceLimits
// suite's ctest entry sets session_wait_s 20, so that a waiter that was let in would hold
// its worker thread long enough to be seen.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "helpers.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

HttpResponse PostWithin(const std::string& body, int timeout_s) {
  httplib::Client client("127.0.0.1", Stack::Get().port());
  client.set_connection_timeout(timeout_s, 0);
  client.set_read_timeout(timeout_s, 0);
  client.set_write_timeout(timeout_s, 0);
  return FromResult(client.Post("/run", body, "application/json"), "POST /run");
}

// GET /healthz with a short timeout: status, or 0 when no answer came in time.
int HealthzWithin(int timeout_s) {
  httplib::Client client("127.0.0.1", Stack::Get().port());
  client.set_connection_timeout(timeout_s, 0);
  client.set_read_timeout(timeout_s, 0);
  auto r = client.Get("/healthz");
  return r ? r->status : 0;
}

// The stack's sandrund: the process started with --config <state>/sandrun.jsonc whose parent
// is not one too (a sandbox's init is a clone of the daemon).
pid_t DaemonPid() {
  const std::string config = Stack::Get().state_dir() + "/sandrun.jsonc";
  std::set<pid_t> matches;
  for (const auto& [pid, argv] : ProcessArgvs()) {
    for (size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == "--config" && argv[i + 1] == config) matches.insert(pid);
    }
  }
  for (pid_t pid : matches) {
    const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::string state;
    pid_t ppid = 0;
    fields >> state >> ppid;
    if (matches.count(ppid) == 0) return pid;
  }
  return -1;
}

// A line "<key>: <n> kB" of /proc/<pid>/status, in bytes; -1 if absent.
int64_t StatusBytes(pid_t pid, const std::string& key) {
  std::istringstream lines(ReadFile("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1)) * 1024;
  }
  return -1;
}

// Connections waiting in the accept queues of the listening TCP sockets of `port` (IPv4;
// /proc/net/tcp's rx_queue of a socket in state LISTEN, 0A); -1 when none listens there.
int64_t ListenQueue(int port) {
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  std::getline(tcp, line);  // the header
  char wanted[8];
  std::snprintf(wanted, sizeof wanted, ":%04X", port);
  int64_t queued = -1;
  while (std::getline(tcp, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues;
    fields >> slot >> local >> remote >> state >> queues;
    if (state != "0A" || local.size() < 5 || local.substr(local.size() - 5) != wanted) continue;
    const size_t colon = queues.find(':');
    if (colon == std::string::npos) continue;
    queued = std::max<int64_t>(queued, 0) + std::stoll(queues.substr(colon + 1), nullptr, 16);
  }
  return queued;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(ServiceLimits)

// 24 requests for one busy session held all 22 FastCGI workers for 30 s;
// /healthz and other users' runs stalled. Now at most 2 wait per session (a few in all) and
// the rest get 409 session_busy at once, with Retry-After.
BOOST_AUTO_TEST_CASE(session_waiters_do_not_starve_the_workers) {
  BOOST_REQUIRE(Stack::Get().ConfigInt("session_wait_s") >= 20);
  const std::string session_run =
      R"({"language":"bash","user":"ivy","session":"busy","code":"sleep 3"})";
  auto holder = std::async(std::launch::async, [&] { return PostWithin(session_run, 60); });
  WaitForActiveRuns(1);  // the holder has its session and its sandbox
  constexpr int kOthers = 23;
  std::vector<std::future<std::pair<HttpResponse, double>>> others;
  for (int i = 0; i < kOthers; ++i) {
    others.push_back(std::async(std::launch::async, [&] {
      const auto start = Clock::now();
      HttpResponse r = PostWithin(session_run, 60);
      return std::make_pair(r, SecondsSince(start));
    }));
  }
  // Both places among the session's waiters are taken (the others are refused at once).
  WaitForHealthz("session_waiters", 2, 10);  // session_max_waiters (its default)
  // While they wait: /healthz and another user's run answer promptly (bounds loose: the CPU
  // is shared; without the bound, both waited for the session's waiters, 20 s and more).
  auto start = Clock::now();
  const int health = HealthzWithin(10);
  const double health_s = SecondsSince(start);
  start = Clock::now();
  HttpResponse other_user =
      PostWithin(R"({"language":"bash","user":"jack","code":"echo other"})", 30);
  const double other_s = SecondsSince(start);
  BOOST_TEST(health == 200);
  BOOST_TEST(health_s < 3.0, "/healthz took " << health_s << " s");
  BOOST_TEST(other_user.status == 200, other_user.body);
  BOOST_TEST(other_s < 6.0, "another user's run took " << other_s << " s");

  int ok = 0, busy_at_once = 0, busy_late = 0;
  for (auto& f : others) {
    auto [r, seconds] = f.get();
    if (r.status == 200) {
      ++ok;
    } else if (r.status == 409) {
      BOOST_TEST(ParseServiceError(r.body).code == "session_busy");
      BOOST_TEST(!r.Header("Retry-After").empty());
      (seconds < 2.5 ? busy_at_once : busy_late)++;
    } else {
      BOOST_TEST(false, "status " << r.status << ": " << r.body);
    }
  }
  BOOST_TEST(holder.get().status == 200);
  BOOST_TEST_MESSAGE(ok << " waited and ran, " << busy_at_once << " got 409 at once, " << busy_late
                        << " later; /healthz " << health_s << " s, other user " << other_s << " s");
  BOOST_TEST(ok <= 2);  // session_max_waiters
  BOOST_TEST(busy_at_once >= kOthers - 2);
}

// 16 MiB of `[` took 419 MB of daemon memory (8 at once, 3 GB). The parse
// now stops at nesting 32 (and at 10000 values): the daemon's peak RSS (VmHWM) grows by less
// than 4 times the body cap.
BOOST_AUTO_TEST_CASE(deep_json_does_not_inflate_daemon_memory) {
  const pid_t daemon = DaemonPid();
  BOOST_REQUIRE_MESSAGE(daemon > 0, "sandrund of this stack not found");
  const int64_t cap = 16 << 20;  // nginx's client_max_body_size and max_body_bytes
  const int64_t before = StatusBytes(daemon, "VmHWM");
  BOOST_REQUIRE(before > 0);
  std::string wide = "[";
  while (static_cast<int64_t>(wide.size()) < cap - 8) wide += "0,";
  wide += "0]";
  for (const std::string& body : {std::string(cap - 1, '['), wide}) {
    HttpResponse r = PostWithin(body, 60);
    BOOST_TEST(r.status == 400, r.body.substr(0, 200));
    const ServiceError error = ParseServiceError(r.body);
    BOOST_TEST(error.code == "invalid_json");
    BOOST_TEST(error.message.find("at byte offset") != std::string::npos, error.message);
  }
  const int64_t after = StatusBytes(daemon, "VmHWM");
  BOOST_TEST_MESSAGE("sandrund VmHWM " << before / 1024 << " kB -> " << after / 1024 << " kB");
  BOOST_TEST(after - before < 4 * cap, "peak RSS grew by " << (after - before) / 1024 << " kB");
}

// 1100 idle connections took all of nginx's worker_connections (512 per
// worker) and /healthz failed. With 4096 per worker and short idle timeouts it answers.
// Each connection sends half a request line and then nothing (client_header_timeout closes
// them after 10 s).
BOOST_AUTO_TEST_CASE(idle_connections_do_not_block_healthz) {
  constexpr int kIdle = 1100;
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  if (files.rlim_cur < kIdle + 200) {
    files.rlim_cur = std::min<rlim_t>(files.rlim_max, kIdle + 500);
    setrlimit(RLIMIT_NOFILE, &files);
  }
  BOOST_REQUIRE_MESSAGE(files.rlim_cur >= kIdle + 200, "RLIMIT_NOFILE too low for the test");
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(Stack::Get().port()));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int connected = 0;
  std::vector<int> fds;
  // A connect that found nginx's listen backlog full (a loaded machine) is tried again with a
  // new socket, a bounded number of times: the case needs kIdle connections held open.
  for (int attempt = 0; connected < kIdle && attempt < kIdle + 200; ++attempt) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) break;
    // A bounded connect (SO_SNDTIMEO applies to it): past the backlog it would wait.
    timeval bound{0, 300000};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof bound);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) {
      ::close(fd);
      continue;
    }
    fds.push_back(fd);
    // Half a request line: nginx cannot reuse such a connection for others (an idle one
    // without a byte it may close when short of connections), as in a slowloris attack.
    (void)!::send(fd, "GET /", 5, MSG_NOSIGNAL);
    ++connected;
  }
  // nginx has accepted them: its listening sockets' accept queues are empty.
  const auto accepting = Clock::now();
  while (ListenQueue(Stack::Get().port()) != 0 && SecondsSince(accepting) < 10) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a poll, bounded above
  }
  BOOST_TEST(ListenQueue(Stack::Get().port()) == 0, "nginx left connections unaccepted");
  const auto start = Clock::now();
  const int health = HealthzWithin(5);
  const double health_s = SecondsSince(start);
  for (int fd : fds) ::close(fd);
  BOOST_TEST_MESSAGE(connected << " idle connections open: /healthz " << health << " in "
                               << health_s << " s");
  BOOST_TEST(connected == kIdle);
  BOOST_TEST(health == 200);
  BOOST_TEST(health_s < 5.0);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
