// Containment, round two: sandboxes
// die with their daemon, SIGTERM drains, a restart sweeps leftover run cgroups, init is not
// the OOM killer's choice, a session's restore is charged to the run, and per-user kernel
// counters of a run are not charged to host root. The destructive cases (SIGTERM, SIGKILL
// of the daemon) come last and restart the stack after themselves.
#include <dirent.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <sstream>
#include <thread>

#include "helpers.h"
#include "host_state.h"
#include "stack.h"
#include "streamed.h"

namespace sandrun::integration {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// CPU time used by the run cgroups of the stack, in ms (cpuacct on v1, cpu.stat on v2; on a v1
// host the socket cap's cgroup2 directories have a cpu.stat too, the same CPU again).
int64_t RunCgroupCpuMs() {
  int64_t ms = 0;
  struct statfs fs;
  const bool v2_host = ::statfs("/sys/fs/cgroup", &fs) == 0 && fs.f_type == 0x63677270;
  for (const auto& dir : RunCgroupDirs()) {
    std::ifstream v1(dir + "/cpuacct.usage");
    int64_t ns = 0;
    if (v1 >> ns) ms += ns / 1'000'000;
    if (!v2_host) continue;
    std::ifstream v2(dir + "/cpu.stat");
    std::string key;
    int64_t value = 0;
    while (v2 >> key >> value) {
      if (key == "usage_usec") ms += value / 1000;
    }
  }
  return ms;
}

int64_t ShmemKb() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (meminfo >> key >> kb) {
    std::getline(meminfo, unit);
    if (key == "Shmem:") return kb;
  }
  return -1;
}

// Processes of the stack's sandbox uids that are not zombies. (A sandbox's init orphaned by
// a killed daemon is reparented to the host's pid 1, which on some hosts reaps its zombies
// only now and then: a zombie runs nothing and holds no memory.)
int LiveSandboxProcessCount() {
  const uid_t base = Stack::Get().sandbox_uid();
  int n = 0;
  DIR* proc = ::opendir("/proc");
  while (struct dirent* e = ::readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const std::string dir = std::string("/proc/") + e->d_name;
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0 || (st.st_uid != base && st.st_uid != base + 1)) continue;
    const std::string stat = ReadFile(dir + "/stat");
    const size_t paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z') ++n;
  }
  ::closedir(proc);
  return n;
}

// Waits until `done` is true or `timeout_s` passed; returns the seconds waited.
double WaitFor(const std::function<bool()>& done, double timeout_s) {
  const auto start = Clock::now();
  while (!done() && SecondsSince(start) < timeout_s) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return SecondsSince(start);
}

std::string SessionRun(const std::string& code, const std::map<std::string, int64_t>& limits,
                       const std::string& session = "big", const std::string& language = "bash") {
  return R"({"user":"cora","session":")" + session + "\"," +
         RunRequest(language, code, limits).substr(1);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(Containment)

// snekbox's test_multiprocess_resource_limits: two children of 40 MB under 70 MiB.
// Init was a copy of the daemon (its RSS) and the OOM killer chose it, ending the whole run;
// now init is a small executable and the program's processes have oom_score_adj 1000, so
// the kernel kills one child and the parent prints both exit codes.
BOOST_AUTO_TEST_CASE(oom_killer_picks_a_child_not_init) {
  const std::string code =
      "import time\nfrom multiprocessing import Process\n\n"
      "def f():\n    object = 'A' * 40_000_000\n    time.sleep(0.5)\n\n"
      "proc_1 = Process(target=f)\nproc_2 = Process(target=f)\n"
      "proc_1.start()\nproc_2.start()\nproc_1.join()\nproc_2.join()\n"
      "print(proc_1.exitcode, proc_2.exitcode)\n";
  auto doc = PostRun(RunRequest("python", code, {{"memory_mb", 70}}));
  const std::string out = Str(doc, "stdout");
  BOOST_TEST_MESSAGE("multiprocess under 70 MiB: status " << Str(doc, "status") << ", stdout "
                                                          << out);
  std::istringstream codes(out);
  std::string a, b;
  codes >> a >> b;
  BOOST_TEST((a == "-9" || b == "-9"), "one child OOM-killed; stdout: " << out);
  BOOST_TEST(!b.empty(), "the parent survived to print both exit codes; stdout: " << out);
  BOOST_TEST(Str(doc, "status") == "memory_limit");
}

// The user namespace was created by root, so the kernel charged the run's inotify
// instances to host root (limit 128 per user): a run taking them all left host root's
// services with EMFILE. Now the namespace is owned by the sandbox uid and bounded inside.
BOOST_AUTO_TEST_CASE(inotify_of_a_run_is_not_charged_to_host_root) {
  const std::string code =
      "import ctypes, time\nlibc = ctypes.CDLL(None, use_errno=True)\nn = 0\n"
      "while n < 1000 and libc.inotify_init1(0) >= 0:\n    n += 1\n"
      "print(n, ctypes.get_errno(), flush=True)\ntime.sleep(4)\n";
  // Streamed: once its line arrives, the run holds every instance it could take (and keeps
  // them for 4 s more); host root takes one then.
  int fd = -2, err = 0;
  const Streamed s = PostStreamed(RunRequest("python", code), [&](const Event& e) {
    if (e.name == "stdout" && fd == -2) {
      fd = inotify_init1(IN_CLOEXEC);
      err = errno;
      if (fd >= 0) close(fd);
    }
    return false;  // read on to the result
  });
  BOOST_TEST_REQUIRE((!s.events.empty() && s.events.back().name == "result"), s.body);
  const rapidjson::Value& doc = s.events.back().doc["result"];
  BOOST_TEST_MESSAGE("inotify: run got " << Str(doc, "stdout") << "(count errno); host root fd "
                                         << fd);
  BOOST_TEST(fd != -2, "no stdout streamed while the run held its instances");
  BOOST_TEST(fd >= 0, "host root's inotify_init1 failed during the run: errno " << err);
  std::istringstream out(Str(doc, "stdout"));
  int count = 0;
  out >> count;
  BOOST_TEST(count >= 8, "the run made its own instances: " << count);
  BOOST_TEST(count < 1000, "the run's instances are bounded: " << count);
}

// Every sandbox's user namespace is owned by the one sandbox uid, whose host limit of
// inotify instances (128 by default) all sandboxes share. Each sandbox had 32 in its own
// namespace, so one user's 4 kernels (max_kernels) held all 128 between their runs and every
// other user's inotify_init failed with EMFILE. Now the shares of all sandboxes that can
// exist at once add up to less than the host's limit (sandbox/user_limits.h).
BOOST_AUTO_TEST_CASE(one_users_kernels_cannot_take_another_users_inotify_instances) {
  const std::string grab =
      R"(import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nheld = []\n)"
      R"(while len(held) < 1000:\n    fd = libc.inotify_init1(0)\n    if fd < 0:\n)"
      R"(        break\n    held.append(fd)\nprint(len(held)))";
  int total = 0;
  for (const char* session : {"ino-1", "ino-2", "ino-3", "ino-4"}) {
    auto r = PostRun(R"({"language": "python", "stateful": true, "user": "ino-a", "session": ")" +
                     std::string(session) + R"(", "code": ")" + grab + "\"}");
    BOOST_TEST_REQUIRE(Str(r, "status") == "ok", Str(r, "stderr"));
    const int held = std::stoi(Str(r, "stdout"));
    BOOST_TEST_MESSAGE("kernel " << session << " holds " << held << " inotify instances");
    BOOST_TEST(held >= 1);
    total += held;
  }
  BOOST_TEST(total < 128, "one user's kernels hold " << total << " instances");
  auto other = PostRun(
      R"j({"language": "python", "user": "ino-b", "code": "import ctypes\nlibc = )j"
      R"j(ctypes.CDLL(None, use_errno=True)\nprint(libc.inotify_init1(0) >= 0, ctypes.get_errno())"})j");
  BOOST_TEST(Str(other, "stdout") == "True 0\n", Str(other, "stdout") << Str(other, "stderr"));
  // A stateless run of a session ends its kernel: the cases after this one find no sandbox.
  for (const char* session : {"ino-1", "ino-2", "ino-3", "ino-4"}) {
    PostRun(R"({"language": "bash", "code": "true", "user": "ino-a", "session": ")" +
            std::string(session) + "\"}");
  }
  BOOST_TEST(WaitFor([] { return SandboxProcessCount() == 0; }, 10) < 10, "kernels left");
}

// The daemon wrote a session into the run's tmpfs itself, so its pages were charged
// to the daemon: a run with memory_mb 64 held a 200 MB session in host memory. Now a helper
// in a cgroup with the run's memory limit restores it, and the run is refused.
BOOST_AUTO_TEST_CASE(session_restore_is_bounded_by_the_run_memory_limit) {
  auto made = PostRun(SessionRun(
      "for i in $(seq 20); do head -c 10000000 /dev/urandom > .cache-f$i; done; du -sh .",
      {{"memory_mb", 512}, {"disk_mb", 400}}));
  BOOST_TEST_REQUIRE(Str(made, "status") == "ok", Str(made, "stderr"));
  const int64_t before_kb = ShmemKb();
  std::atomic<bool> done{false};
  std::atomic<int64_t> peak_kb{before_kb};
  std::thread sampler([&] {
    while (!done) {
      peak_kb = std::max<int64_t>(peak_kb, ShmemKb());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  HttpResponse small =
      Post("/run", SessionRun("sleep 3; echo restored", {{"memory_mb", 64}, {"disk_mb", 400}}));
  done = true;
  sampler.join();
  const int64_t growth_mb = (peak_kb - before_kb) / 1024;
  BOOST_TEST_MESSAGE("200 MB session into memory_mb 64: HTTP " << small.status << ", host Shmem +"
                                                               << growth_mb << " MB at peak");
  BOOST_TEST(small.status == 400, small.body);
  BOOST_TEST(ParseServiceError(small.body).code == "memory_limit", small.body);
  BOOST_TEST(growth_mb < 150, "host shared memory grew by " << growth_mb << " MB");
  // With room for it, the same session restores.
  auto big = PostRun(SessionRun("ls .cache-f* | wc -l", {{"memory_mb", 512}, {"disk_mb", 400}}));
  BOOST_TEST(Str(big, "stdout") == "20\n", Str(big, "stderr"));
}

// The restore helper had a cgroup of its own, removed before the run
// started, so the session's tmpfs pages stayed charged outside the run (on v1 they moved to
// the parent): a run with memory_mb 64 could hold a 40 MB session and 40 MB of its own. Now
// the restore and every step run in the run's one cgroup, so the session counts against
// memory_mb while the program runs.
BOOST_AUTO_TEST_CASE(restored_session_counts_against_the_run_memory_limit) {
  // Four files of 10 MB (RLIMIT_FSIZE is file_size_mb, 10 MiB by default).
  auto made = PostRun(SessionRun(
      "set -e; for i in 1 2 3 4; do head -c 10000000 /dev/urandom > .cache-f$i; done; du -sh .",
      {{"memory_mb", 256}, {"disk_mb", 100}}, "charged"));
  BOOST_TEST_REQUIRE(Str(made, "status") == "ok", Str(made, "stderr"));
  const std::string grow =
      "import glob, os\n"
      "assert sum(os.path.getsize(f) for f in glob.glob('.cache-f*')) == 40_000_000\n"
      "data = b'x' * 40_000_000\nprint('allocated', len(data))\n";
  auto tight =
      PostRun(SessionRun(grow, {{"memory_mb", 64}, {"disk_mb", 100}}, "charged", "python"));
  BOOST_TEST_MESSAGE("40 MB session + 40 MB allocation under memory_mb 64: status "
                     << Str(tight, "status") << ", stderr " << Str(tight, "stderr"));
  BOOST_TEST(Str(tight, "status") == "memory_limit", Str(tight, "stdout") << Str(tight, "stderr"));
  // With room for both, the same program runs.
  auto roomy =
      PostRun(SessionRun(grow, {{"memory_mb", 160}, {"disk_mb", 100}}, "charged", "python"));
  BOOST_TEST(Str(roomy, "status") == "ok", Str(roomy, "stderr"));
  BOOST_TEST(Str(roomy, "stdout") == "allocated 40000000\n", Str(roomy, "stderr"));
}

// The steps of one run share its cgroup: a later step does not inherit an earlier step's
// OOM kill (the cgroup's counters are read per step).
BOOST_AUTO_TEST_CASE(steps_share_the_run_cgroup_with_per_step_outcomes) {
  const std::string body = R"({"snippets":[{"language":"python","code":"x = b'y' * 200_000_000"},)"
                           R"({"language":"bash","code":"echo second"}],"continue_on_error":true,)"
                           R"("limits":{"memory_mb":64}})";
  auto doc = PostRun(body);
  BOOST_TEST_MESSAGE("two steps, the first OOM: status " << Str(doc, "status"));
  BOOST_TEST_REQUIRE(doc.HasMember("snippets"), Str(doc, "stderr"));
  const rapidjson::Value& steps = doc["snippets"];
  BOOST_TEST_REQUIRE(steps.Size() == 2u);
  BOOST_TEST(Str(steps[0], "status") == "memory_limit", Str(steps[0], "stderr"));
  BOOST_TEST(Str(steps[1], "status") == "ok", Str(steps[1], "stderr"));
  BOOST_TEST(Str(steps[1], "stdout") == "second\n");
}

// A step ends at init's report, while the kernel may still be tearing that init's namespaces
// down; the init is reaped before the next step starts in the same cgroup, else it would
// count against pids.max: at the lowest process limit (2: init and the program) five steps
// in a row all run.
BOOST_AUTO_TEST_CASE(steps_at_the_lowest_process_limit_all_run) {
  std::string body = R"({"snippets":[)";
  for (int i = 1; i <= 5; ++i) {
    body += std::string(i > 1 ? "," : "") + R"({"language":"bash","code":"echo step )" +
            std::to_string(i) + R"("})";
  }
  body += R"(],"limits":{"processes":2}})";
  auto doc = PostRun(body);
  BOOST_TEST_REQUIRE(doc.HasMember("snippets"), Str(doc, "stderr"));
  const rapidjson::Value& steps = doc["snippets"];
  BOOST_TEST_REQUIRE(steps.Size() == 5u);
  for (rapidjson::SizeType i = 0; i < steps.Size(); ++i) {
    BOOST_TEST(Str(steps[i], "status") == "ok",
               "step " << i + 1 << ": " << Str(steps[i], "stderr"));
    BOOST_TEST(Str(steps[i], "stdout") == "step " + std::to_string(i + 1) + "\n");
  }
}

// proc-04 across steps: a background job of the first step ends with that step (its init
// reports, then its exit takes the job with it) and is reaped before the next step starts
// in the same cgroup, else the job and the unreaped init would hold 2 of 3 processes and the
// second step could not fork.
BOOST_AUTO_TEST_CASE(background_job_of_a_step_does_not_outlive_it) {
  const auto start = Clock::now();
  auto doc = PostRun(
      R"({"snippets":[{"language":"bash","code":"sleep 300 &\necho started background job"},)"
      R"({"language":"bash","code":"echo second"}],"limits":{"processes":3}})");
  BOOST_TEST(SecondsSince(start) < 3.0, "the background job held the run");
  BOOST_TEST_REQUIRE(doc.HasMember("snippets"), Str(doc, "stderr"));
  const rapidjson::Value& steps = doc["snippets"];
  BOOST_TEST_REQUIRE(steps.Size() == 2u);
  BOOST_TEST(Str(steps[0], "status") == "ok", Str(steps[0], "stderr"));
  BOOST_TEST(Str(steps[0], "stdout") == "started background job\n");
  BOOST_TEST(Str(steps[1], "status") == "ok", Str(steps[1], "stderr"));
  BOOST_TEST(Str(steps[1], "stdout") == "second\n");
  BOOST_TEST(WaitFor([] { return SandboxProcessCount() == 0; }, 5) < 5, "sleep 300 left");
}

// SIGTERM stopped the server at once and exited after 3 s whatever ran. Now runs in
// flight finish (up to their wall limit), new ones get 503, then the daemon exits.
BOOST_AUTO_TEST_CASE(sigterm_drains_runs_in_flight) {
  const pid_t daemon = Stack::Get().DaemonPid();
  BOOST_TEST_REQUIRE(daemon > 0);
  auto inflight = std::async(std::launch::async, [] {
    return Post("/run", RunRequest("bash", "sleep 2; echo finished"));
  });
  BOOST_TEST_REQUIRE(WaitFor([] { return SandboxProcessCount() > 0; }, 10) < 10);
  const auto term = Clock::now();
  kill(daemon, SIGTERM);
  // The daemon drains: /healthz says "stopping" (503) from then on.
  BOOST_TEST_REQUIRE(
      WaitFor([] { return Get("/healthz").body.find("\"stopping\"") != std::string::npos; }, 10) <
          10,
      "/healthz never said stopping after SIGTERM");
  HttpResponse refused = Post("/run", RunRequest("bash", "echo late"));
  HttpResponse first = inflight.get();
  const double exit_s = WaitFor([&] { return !ProcessAlive(daemon); }, 30);
  BOOST_TEST_MESSAGE("drain: in-flight run HTTP " << first.status << "; later run HTTP "
                                                  << refused.status << "; daemon gone "
                                                  << SecondsSince(term) << " s after SIGTERM");
  BOOST_TEST(first.status == 200, first.body);
  BOOST_TEST(first.body.find("finished") != std::string::npos, first.body);
  BOOST_TEST(refused.status == 503, refused.body);
  BOOST_TEST(exit_s < 30, "the daemon exited after the drain");
  Stack::Get().Restart();
}

// kill -9 of the daemon during a busy loop left the sandbox running with no
// limit (its cgroup's CPU time rising), and a restart kept run cgroups younger than 60 s.
// Now the sandbox dies within about a second (init's PDEATHSIG, lifeline), and the restart
// kills what is in leftover run cgroups of its name and removes them.
BOOST_AUTO_TEST_CASE(sandbox_dies_with_a_killed_daemon_and_restart_sweeps) {
  const pid_t daemon = Stack::Get().DaemonPid();
  BOOST_TEST_REQUIRE(daemon > 0);
  const std::string loop =
      "exec >/dev/null 2>&1; while :; do timeout -s KILL 1.5 sh -c 'while :; do :; done'; done";
  const int64_t cpu_before = RunCgroupCpuMs();
  auto run = std::async(std::launch::async, [&] {
    return Post("/run", RunRequest("bash", loop, {{"wall_time_s", 5}, {"cpu_time_s", 5}}));
  });
  BOOST_TEST_REQUIRE(WaitFor([] { return SandboxProcessCount() > 0; }, 10) < 10);
  // The busy loop runs: its run cgroup has used CPU time.
  BOOST_TEST_REQUIRE(WaitFor([&] { return RunCgroupCpuMs() >= cpu_before + 200; }, 10) < 10,
                     "the run's cgroup used no CPU");
  const auto killed = Clock::now();
  kill(daemon, SIGKILL);
  const double gone_s = WaitFor([] { return LiveSandboxProcessCount() == 0; }, 10);
  const int64_t cpu0 = RunCgroupCpuMs();
  std::this_thread::sleep_for(std::chrono::seconds(1));  // the window measured, not a wait
  const int64_t cpu1 = RunCgroupCpuMs();
  // The request in flight: nginx's JSON 502 with Retry-After (a cluster front and the plugins
  // retry on it), never an HTML page. (scripts/serve then stops nginx too.)
  const HttpResponse gone = run.get();
  BOOST_TEST(gone.status == 502, gone.status << " " << gone.body);
  BOOST_TEST(gone.Header("Retry-After") == "1");
  BOOST_TEST(gone.body.find("\"unavailable\"") != std::string::npos, gone.body);
  BOOST_TEST_MESSAGE("kill -9 of the daemon: sandbox processes gone after "
                     << gone_s << " s; run cgroup CPU +" << (cpu1 - cpu0)
                     << " ms in the next second");
  BOOST_TEST(gone_s < 1.5, "sandbox processes left " << SecondsSince(killed) << " s after");
  BOOST_TEST(cpu1 - cpu0 < 100, "the run cgroup still used CPU");

  // The dead daemon's run cgroup is still there; put a live process into it (as a crash
  // might leave one) and restart: the process is killed and every run cgroup removed.
  const std::vector<std::string> left = RunCgroupDirs();
  BOOST_TEST(!left.empty(), "the killed daemon left its run cgroup");
  const pid_t sleeper = fork();
  if (sleeper == 0) {
    execl("/bin/sleep", "sleep", "300", static_cast<char*>(nullptr));
    _exit(127);
  }
  for (const auto& dir : left) {
    std::ofstream(dir + "/cgroup.procs") << sleeper << "\n";
  }
  Stack::Get().Restart();
  int status = 0;
  const bool reaped = waitpid(sleeper, &status, WNOHANG) == sleeper;
  if (!reaped) {
    kill(sleeper, SIGKILL);
    waitpid(sleeper, &status, 0);
  }
  BOOST_TEST(reaped, "the process in a leftover run cgroup was killed at start-up");
  // The dead daemon's cgroups, by name, and none at all (Restart waits out the new daemon's
  // own example run).
  for (const auto& dir : left) {
    BOOST_TEST(!std::filesystem::exists(dir),
               "leftover run cgroup " << dir << " removed at start-up");
  }
  BOOST_TEST(LeftoverRunCgroups() == 0, "leftover run cgroups removed at start-up");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
