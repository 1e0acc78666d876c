// The warm pool: sandboxes started ahead of their runs, with the
// interpreter waiting for its program. Through the real nginx and daemon, whose default config
// (scripts/serve) keeps {"python": 2, "bash": 1} ready. A run of the default disk_mb fits the
// pool; the same run with another disk_mb starts cold, so each case runs both ways and
// compares what the user sees. /metrics says which way each went.
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sched.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "helpers.h"
#include "host_state.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

struct Program {
  Program(std::string n, std::string l, std::string c, std::string in = "",
          std::map<std::string, std::string> files = {})
      : name(std::move(n)),
        language(std::move(l)),
        code(std::move(c)),
        stdin_data(std::move(in)),
        files_base64(std::move(files)) {}
  std::string name, language, code;
  std::string stdin_data;
  std::map<std::string, std::string> files_base64;  // path -> content (base64)
};

// A /run body; `disk_mb` 0 leaves the default (the pool's shape), another value makes it cold.
std::string Body(const Program& p, int64_t disk_mb, const std::map<std::string, int64_t>& limits) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("language");
  w.String(p.language.c_str());
  w.Key("code");
  w.String(p.code.c_str());
  if (!p.stdin_data.empty()) {
    w.Key("stdin");
    w.String(p.stdin_data.c_str());
  }
  if (!p.files_base64.empty()) {
    w.Key("files");
    w.StartArray();
    for (const auto& [path, content] : p.files_base64) {
      w.StartObject();
      w.Key("path");
      w.String(path.c_str());
      w.Key("content_base64");
      w.String(content.c_str());
      w.EndObject();
    }
    w.EndArray();
  }
  w.Key("limits");
  w.StartObject();
  if (disk_mb > 0) {
    w.Key("disk_mb");
    w.Int64(disk_mb);
  }
  for (const auto& [key, value] : limits) {
    w.Key(key.c_str());
    w.Int64(value);
  }
  w.EndObject();
  w.EndObject();
  return buffer.GetString();
}

// Runs `p` once from the pool and once cold; checks which way each went.
std::pair<rapidjson::Document, rapidjson::Document> WarmAndCold(
    const Program& p, const std::map<std::string, int64_t>& limits = {}) {
  BOOST_TEST_REQUIRE(WaitForQuietHost(), "the warm pool fills");
  const int64_t hits0 = WarmPoolHits(p.language);
  rapidjson::Document warm = PostRun(Body(p, 0, limits));
  const int64_t hits1 = WarmPoolHits(p.language);
  const int64_t default_disk = Int(warm["limits"], "disk_mb");
  rapidjson::Document cold = PostRun(Body(p, default_disk - 1, limits));
  const int64_t hits2 = WarmPoolHits(p.language);
  BOOST_TEST(hits1 == hits0 + 1, p.name << ": the default shape took a warm sandbox; /healthz: "
                                        << Get("/healthz").body);
  BOOST_TEST(hits2 == hits1, p.name << ": another disk_mb ran cold");
  return {std::move(warm), std::move(cold)};
}

void ExpectSame(const Program& p) {
  auto [warm, cold] = WarmAndCold(p);
  BOOST_TEST_CONTEXT(p.name) {
    for (const char* key : {"status", "stdout", "stderr"}) {
      BOOST_TEST(Str(warm, key) == Str(cold, key),
                 key << " warm: " << Str(warm, key) << "\ncold: " << Str(cold, key));
    }
    BOOST_TEST(Int(warm, "exit_code") == Int(cold, "exit_code"));
  }
}

// What /healthz showed of the python pool while two runs of `code` held their pooled
// sandboxes (from when both had taken one until ~2.5 s later): whether a refill was deferred
// and the most sandboxes ready. Both runs must answer "1".
struct PoolWhileTwoRun {
  bool seen_deferred = false;
  int64_t most_ready = 0;
  std::string health;
};
PoolWhileTwoRun WatchPoolWhileTwoRun(const std::string& code) {
  PoolWhileTwoRun seen;
  const int64_t hits = WarmPoolHits("python");
  std::vector<std::thread> runs;
  std::atomic<int> ok{0};
  for (int i = 0; i < 2; ++i) {
    runs.emplace_back([&ok, &code] {
      HttpResponse r = Post("/run", RunRequest("python", code));
      if (r.status == 200 && r.body.find("\"stdout\":\"1\\n\"") != std::string::npos) ++ok;
    });
  }
  // A refill that began when only the first had taken its sandbox may still end.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2500);
  while (std::chrono::steady_clock::now() < until) {
    seen.health = Get("/healthz").body;
    auto doc = ParseJson(seen.health);
    const auto& python = doc["pool"]["python"];
    if (WarmPoolHits("python") >= hits + 2 && Int(doc, "active") == 2) {
      seen.seen_deferred = seen.seen_deferred || python["deferred"].GetBool();
      seen.most_ready = std::max(seen.most_ready, Int(python, "ready"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (auto& t : runs) t.join();
  BOOST_TEST(ok.load() == 2);
  BOOST_TEST(WarmPoolHits("python") >= hits + 2, "both runs took a pooled sandbox");
  return seen;
}

bool AtMostTwoCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  BOOST_TEST_REQUIRE(::sched_getaffinity(0, sizeof set, &set) == 0);
  return CPU_COUNT(&set) <= 2;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(WarmPool)

// The loader runs the program as `python3 main.py` would: the cold start is the reference.
BOOST_AUTO_TEST_CASE(a_warm_python_run_is_a_cold_one) {
  const std::vector<Program> programs = {
      {"traceback", "python", "def f():\n    raise ValueError('boom')\n\nf()\n"},
      {"main_argv_file", "python",
       "import sys\nprint(__name__, sys.argv, __file__, sys.path[0])\n"
       "if __name__ == '__main__':\n    print('as main')\n"},
      {"relative_import",
       "python",
       "import helper\nfrom helper import X\nprint(helper.X + X)\n",
       "",
       {{"helper.py", "WCA9IDQy"}}},
      {"input_from_stdin", "python",
       "name = input()\nprint('hi', name)\nimport sys\nprint(repr(sys.stdin.read()))\n",
       "alice\nrest of it\n"},
      {"trailing_expression", "python", "x = 20\nx + 22\n"},
      {"exit_code", "python", "import sys\nprint('bye')\nsys.exit(3)\n"},
      {"syntax_error", "python", "print('a'\n"},
      {"rlimits", "python",
       "import resource as r\nprint(r.getrlimit(r.RLIMIT_CPU), r.getrlimit(r.RLIMIT_FSIZE), "
       "r.getrlimit(r.RLIMIT_NOFILE))\n"},
      {"bash_env", "bash",
       "echo \"$0 $# $SHLVL $PWD\"; ulimit -t; ulimit -f; env | sort | grep -v '^_='"},
      {"bash_stdin", "bash", "read -r a; echo \"first=$a\"; cat", "one\ntwo\nthree\n"},
      {"bash_exit", "bash", "echo out; echo err >&2; exit 7"},
  };
  for (const auto& p : programs) ExpectSame(p);
}

// The run's own limits hold in a sandbox started with the defaults: memory and processes are
// written to its cgroup when it is taken, CPU time and file size lowered by the start line.
BOOST_AUTO_TEST_CASE(a_runs_limits_hold_in_a_warm_sandbox) {
  {
    Program p{"memory", "python", "x = bytearray(96 << 20)\nprint('allocated')\n"};
    auto [warm, cold] = WarmAndCold(p, {{"memory_mb", 48}});
    BOOST_TEST(Str(warm, "status") == "memory_limit", Str(warm, "stderr"));
    BOOST_TEST(Str(cold, "status") == "memory_limit", Str(cold, "stderr"));
  }
  {
    Program p{"cpu", "python", "while True:\n    pass\n"};
    auto [warm, cold] = WarmAndCold(p, {{"cpu_time_s", 1}, {"wall_time_s", 8}});
    BOOST_TEST(Str(warm, "status") == "timeout", Str(warm, "stderr"));
    BOOST_TEST(Str(warm, "stderr").find("CPU") != std::string::npos, Str(warm, "stderr"));
    BOOST_TEST(Int(warm["usage"], "wall_ms") < 6000);
  }
  {
    Program p{"file_size", "python",
              "try:\n    open('big', 'wb').write(b'x' * (3 << 20))\nexcept OSError as e:\n"
              "    print('refused', e.errno)\n"};
    auto [warm, cold] = WarmAndCold(p, {{"file_size_mb", 1}});
    BOOST_TEST(Str(warm, "stdout") == "refused 27\n", Str(warm, "stdout") << Str(warm, "stderr"));
    BOOST_TEST(Str(warm, "stdout") == Str(cold, "stdout"));
  }
  {
    Program p{"processes", "bash", "for i in $(seq 20); do sleep 1 & done; wait; echo done"};
    auto [warm, cold] = WarmAndCold(p, {{"processes", 6}});
    BOOST_TEST(Str(warm, "status") == "error", Str(warm, "stderr"));
    BOOST_TEST(Str(warm, "stderr").find("process limit of 6") != std::string::npos,
               Str(warm, "stderr"));
  }
  {
    Program p{"wall", "bash", "sleep 5; echo late"};
    auto [warm, cold] = WarmAndCold(p, {{"wall_time_s", 1}});
    BOOST_TEST(Str(warm, "status") == "timeout", Str(warm, "stderr"));
    BOOST_TEST(Str(warm, "stdout").empty());
  }
}

// /healthz and /metrics show the pool; it refills after every run it serves.
BOOST_AUTO_TEST_CASE(the_pool_refills_and_reports_its_state) {
  BOOST_TEST_REQUIRE(WaitForQuietHost(), "the warm pool fills");
  auto health = ParseJson(Get("/healthz").body);
  BOOST_TEST_REQUIRE(health.HasMember("pool"));
  BOOST_TEST(Int(health["pool"]["python"], "size") == 2);
  BOOST_TEST(Int(health["pool"]["python"], "ready") == 2);
  BOOST_TEST(Int(health["pool"]["bash"], "size") == 1);
  const int64_t hits = WarmPoolHits("python");
  for (int i = 0; i < 4; ++i) {
    auto r = PostRun(RunRequest("python", "print(6 * 7)"));
    BOOST_TEST(Str(r, "stdout") == "42\n");
  }
  BOOST_TEST(WarmPoolHits("python") >= hits + 2, "back-to-back runs take the ready ones");
  BOOST_TEST(WaitForQuietHost(), "the pool refills to its size");
  const std::string metrics = Get("/metrics").body;
  BOOST_TEST(metrics.find("sandrun_pool_ready{language=\"python\"} 2") != std::string::npos,
             metrics);
  BOOST_TEST(
      metrics.find("sandrun_pool_failures_total{language=\"python\"} 0") != std::string::npos,
      metrics);
}

// Regression (found by scripts/bench at 8 clients): a pooled sandbox was handed out as soon as
// it was cloned, before its mounts were made; the run that took it renamed its directory, and
// its setup failed with "mount step (tmpfs on ...): No such file or directory" (a 500). Ready
// now means set up and waiting. 48 runs from 8 clients, all of them must be ok.
BOOST_AUTO_TEST_CASE(concurrent_runs_never_meet_a_half_built_sandbox) {
  BOOST_TEST_REQUIRE(WaitForQuietHost(), "the warm pool fills");
  std::atomic<int> ok{0}, bad{0};
  std::string first_bad;
  std::mutex mu;
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&] {
      for (int i = 0; i < 6; ++i) {
        HttpResponse r =
            Post("/run", RunRequest(i % 2 ? "bash" : "python", i % 2 ? "echo 1" : "print(1)"));
        if (r.status == 200 && r.body.find("\"stdout\":\"1\\n\"") != std::string::npos) {
          ++ok;
        } else {
          ++bad;
          std::lock_guard lock(mu);
          if (first_bad.empty()) first_bad = std::to_string(r.status) + " " + r.body;
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  BOOST_TEST(bad.load() == 0, first_bad);
  BOOST_TEST(ok.load() == 48);
}

// A refill waits while every CPU runs a sandbox (starting an interpreter
// costs a cold run's CPU, which then only slows the runs in flight), and fills the pool once
// one is free. Two pooled runs spin for 3 s: on a machine of at most 2 CPUs (CI's) they use
// them all (the test stack admits 2 runs), so the pool stays empty and says "deferred" until
// they end; with more CPUs it refills while they spin.
BOOST_AUTO_TEST_CASE(a_refill_waits_for_a_free_cpu) {
  BOOST_TEST_REQUIRE(WaitForQuietHost(), "the warm pool fills");
  const bool saturated = AtMostTwoCpus();
  const PoolWhileTwoRun seen = WatchPoolWhileTwoRun(
      "import time\nend = time.monotonic() + 3\nwhile time.monotonic() < end:\n    pass\n"
      "print(1)");
  if (saturated) {
    BOOST_TEST(seen.seen_deferred,
               "the refill waited while both CPUs ran a sandbox: " << seen.health);
    BOOST_TEST(seen.most_ready <= 1,
               "no refill started while both CPUs ran a sandbox: " << seen.health);
  } else {
    BOOST_TEST(seen.most_ready == 2, "with a CPU free the pool refilled at once: " << seen.health);
  }
  BOOST_TEST(WaitForQuietHost(), "the pool refills once a CPU is free");
  auto after = ParseJson(Get("/healthz").body);
  BOOST_TEST(Int(after["pool"]["python"], "ready") == 2);
  BOOST_TEST(!after["pool"]["python"]["deferred"].GetBool());
}

// Runs that sleep (or wait for input or the network) use no CPU: as many of them as there
// are CPUs do not keep the pool empty, so the runs queued behind them still start warm.
BOOST_AUTO_TEST_CASE(sleeping_runs_do_not_hold_a_refill_back) {
  BOOST_TEST_REQUIRE(WaitForQuietHost(), "the warm pool fills");
  const PoolWhileTwoRun seen = WatchPoolWhileTwoRun("import time\ntime.sleep(3)\nprint(1)");
  BOOST_TEST(seen.most_ready == 2, "the pool refilled while both runs slept: " << seen.health);
  BOOST_TEST(WaitForQuietHost());
}

// Runs the pool does not fit (a session, several programs) start cold and work.
BOOST_AUTO_TEST_CASE(runs_of_another_shape_start_cold) {
  BOOST_TEST_REQUIRE(WaitForQuietHost(), "the warm pool fills");
  const int64_t hits = WarmPoolHits("python");
  auto session =
      PostRun(R"j({"language": "python", "code": "print('s')", "user": "u1", "session": "s1"})j");
  BOOST_TEST(Str(session, "stdout") == "s\n");
  auto markdown =
      PostRun(R"({"markdown": "```python\nprint(1)\n```\n\n```python\nprint(2)\n```\n"})");
  BOOST_TEST(Str(markdown, "status") == "ok", Str(markdown, "stderr"));
  BOOST_TEST(WarmPoolHits("python") == hits, "neither took a warm sandbox");
}

// Last: the daemon stops (SIGTERM); nothing of the pool is left (its processes, directories,
// cgroups and mounts: named pool-<hex> on the host).
BOOST_AUTO_TEST_CASE(no_pooled_sandbox_outlives_the_daemon) {
  BOOST_TEST_REQUIRE(WaitForQuietHost(), "the warm pool fills");
  auto pool_things = [] {
    int n = 0;
    for (const auto& [pid, argv] : ProcessArgvs()) {
      const std::string cgroups = ReadFile("/proc/" + std::to_string(pid) + "/cgroup");
      if (cgroups.find("/" + Stack::Get().cgroup_name() + "/pool-") != std::string::npos) ++n;
    }
    if (const std::string mounts = ReadFile("/proc/self/mountinfo");
        mounts.find(Stack::Get().state_dir() + "/runs/pool-") != std::string::npos) {
      ++n;
    }
    return n;
  };
  BOOST_TEST_REQUIRE(pool_things() > 0, "the pool's sandboxes are there while it runs");
  const pid_t daemon = Stack::Get().DaemonPid();
  BOOST_TEST_REQUIRE(daemon > 0);
  kill(daemon, SIGTERM);
  const auto t = std::chrono::steady_clock::now();
  while (ProcessAlive(daemon) && std::chrono::steady_clock::now() - t < std::chrono::seconds(30)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  BOOST_TEST(!ProcessAlive(daemon));
  BOOST_TEST(pool_things() == 0, "a pooled sandbox's process or mount outlived the daemon");
  Stack::Get().Restart();
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
