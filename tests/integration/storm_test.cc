// A storm of hostile runs from concurrent clients through nginx (issue: containment). The
// daemon must stay up, every answer must be well-formed JSON with a status that fits its
// program, and nothing may pile up on the host: processes, mounts, cgroups, run directories,
// the daemon's open fds. Bounded: SANDRUN_STORM_RUNS runs (default 300) from 8 clients.
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "helpers.h"
#include "host_state.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

struct Kind {
  const char* name;
  std::string body;
  std::set<std::string> statuses;  // acceptable; "503" = refused while busy (also fine)
};

std::vector<Kind> Kinds() {
  const std::map<std::string, int64_t> tight = {{"wall_time_s", 2},
                                                {"memory_mb", 64},
                                                {"processes", 32},
                                                {"output_bytes", 65536},
                                                {"max_files", 50}};
  return {
      {"print", RunRequest("python", "print('ok')", tight), {"ok"}},
      // `sleep 1`: the shell stays while the bomb meets the process limit. Without it the
      // shell exits at once (the bomb's processes are not its children: `wait` does not wait
      // for them), and on a loaded machine the run could end before the limit was reached:
      // then nothing was refused and the run is rightly "ok".
      {"fork_bomb", RunRequest("bash", ":(){ :|:& };:; sleep 1", tight), {"error", "timeout"}},
      // 32 Python processes outgrow 64 MiB: the process or the memory limit, whichever first.
      {"python_fork_loop",
       RunRequest("python", "import os\nwhile True:\n    os.fork()", tight),
       {"error", "timeout", "memory_limit"}},
      {"memory_bomb",
       RunRequest("python", "a = bytearray(1 << 30)", tight),
       {"memory_limit", "error"}},
      {"output_flood",
       RunRequest("python", "while True:\n    print('x' * 100)", tight),
       {"output_limit"}},
      {"sleep_past_timeout", RunRequest("bash", "sleep 100 & sleep 100", tight), {"timeout"}},
      {"file_flood",
       RunRequest("python", "for i in range(2000):\n    open(f'f{i}', 'w').write('x')", tight),
       {"ok"}},
      {"disk_fill", RunRequest("bash", "cat /dev/zero > big; echo done", tight), {"ok", "error"}},
  };
}

struct Counts {
  int processes, cgroups, run_dirs, mounts, daemon_fds;
};

// With the warm pool full and idle and the last run's teardown done, so that the daemon's
// fds (the pool's sandboxes hold some) are counted in the same state before and after. The
// network namespaces kept for their users' next runs (at most 4, one fd each) are a cache,
// not a leak: not counted.
Counts Measure() {
  BOOST_TEST(WaitForQuietHost(30), "the warm pool refills and the runs' teardown ends");
  const int64_t kept = NetNamespaceCount("kept");
  BOOST_TEST(kept >= 0);
  BOOST_TEST(kept <= 4);
  return {SandboxProcessCount(), LeftoverRunCgroups(), RunDirCount(), RunMountCount(),
          DaemonFdCount() - static_cast<int>(kept)};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(Storm)

BOOST_AUTO_TEST_CASE(hostile_storm_leaves_nothing_behind) {
  const int runs =
      std::getenv("SANDRUN_STORM_RUNS") ? std::atoi(std::getenv("SANDRUN_STORM_RUNS")) : 300;
  constexpr int kClients = 8;
  const std::vector<Kind> kinds = Kinds();
  // Warm up (first-run lazy allocations in the daemon), then count.
  PostRun(kinds[0].body);
  const Counts before = Measure();
  BOOST_TEST_REQUIRE(before.daemon_fds > 0, "sandrund not found");

  std::atomic<int> next{0};
  std::mutex mu;
  std::map<std::string, std::map<std::string, int>> seen;  // kind -> status -> count
  std::vector<std::string> problems;
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      for (int i; (i = next++) < runs;) {
        const Kind& kind = kinds[static_cast<size_t>(i) % kinds.size()];
        httplib::Client client("127.0.0.1", Stack::Get().port());
        client.set_read_timeout(120, 0);
        auto r = client.Post("/run", kind.body, "application/json");
        std::string status, problem;
        if (!r) {
          problem = std::string(kind.name) + ": no answer: " + httplib::to_string(r.error());
        } else if (r->status == 503) {
          status = "503";
          if (r->get_header_value("Retry-After").empty()) problem = "503 without Retry-After";
        } else {
          rapidjson::Document doc;
          doc.Parse(r->body.c_str());
          if (doc.HasParseError() || !doc.IsObject()) {
            problem = std::string(kind.name) + ": not JSON: " + r->body.substr(0, 200);
          } else if (r->status != 200 || !doc.HasMember("status")) {
            problem = std::string(kind.name) + ": HTTP " + std::to_string(r->status) + ": " +
                      r->body.substr(0, 300);
          } else {
            status = doc["status"].GetString();
            if (kind.statuses.count(status) == 0) {
              problem = std::string(kind.name) + ": unexpected status " + status + ": " +
                        r->body.substr(0, 300);
            }
            if (!doc["stdout"].IsString() || !doc["stderr"].IsString()) {
              problem = std::string(kind.name) + ": a stream is missing";
            }
          }
        }
        std::lock_guard lock(mu);
        ++seen[kind.name][status.empty() ? "failed" : status];
        if (!problem.empty()) problems.push_back(problem);
      }
    });
  }
  for (auto& t : clients) t.join();

  std::ostringstream summary;
  for (const auto& [kind, statuses] : seen) {
    summary << "  " << kind << ":";
    for (const auto& [status, n] : statuses) summary << " " << status << "=" << n;
    summary << "\n";
  }
  const Counts after = Measure();
  BOOST_TEST_MESSAGE("storm: " << runs << " runs from " << kClients << " clients\n"
                               << summary.str() << "  before: processes=" << before.processes
                               << " cgroups=" << before.cgroups << " run_dirs=" << before.run_dirs
                               << " mounts=" << before.mounts << " daemon_fds=" << before.daemon_fds
                               << "\n  after:  processes=" << after.processes
                               << " cgroups=" << after.cgroups << " run_dirs=" << after.run_dirs
                               << " mounts=" << after.mounts << " daemon_fds=" << after.daemon_fds);
  for (const auto& p : problems) BOOST_ERROR(p);
  BOOST_TEST(after.processes == before.processes);
  BOOST_TEST(after.cgroups == before.cgroups);
  BOOST_TEST(after.run_dirs == before.run_dirs);
  BOOST_TEST(after.mounts == before.mounts);
  BOOST_TEST(after.daemon_fds == before.daemon_fds);
  // Still serving, promptly.
  auto ok = PostRun(RunRequest("bash", "echo ok"));
  BOOST_TEST(Str(ok, "stdout") == "ok\n");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
