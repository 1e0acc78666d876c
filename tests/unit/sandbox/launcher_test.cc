// Real sandboxes, no mocks: needs root (user namespaces with arbitrary id maps, cgroups,
// tmpfs mounts). Without root the suite fails loudly instead of skipping: CI runs as root
// and a skipped sandbox test there would hide a broken sandbox (docs/STYLE.md "Tests").
#define BOOST_TEST_MODULE launcher
#include "sandbox/launcher.h"

#include <dirent.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <fstream>
#include <optional>
#include <thread>

#include "sandbox/root_template.h"
#include "sys/syscalls.h"

using namespace sandrun;
using sandbox::RunOutcome;

namespace {

// Not the daemon's default (64000): a stack running beside this test must not be counted.
constexpr uid_t kHostUid = 64100;

// The root template of the test's sandboxes, in a directory searchable by their ids.
std::string TemplateDir() {
  return "/tmp/sandrun-launcher-test-template-" + std::to_string(::getpid());
}

struct LauncherFixture {
  std::unique_ptr<sandbox::RootTemplate> root_template;
  std::unique_ptr<sandbox::Launcher> launcher;
  LauncherFixture() {
    BOOST_TEST_REQUIRE(::geteuid() == 0, "launcher tests need root (namespaces, mounts, cgroups)");
    auto filter = sandbox::SeccompFilter::Compile();
    BOOST_TEST_REQUIRE(filter.ok());
    auto cgroups = sandbox::DetectCgroups("sandrun-launcher-test");
    BOOST_TEST_REQUIRE(cgroups.ok(), (cgroups.ok() ? "" : cgroups.error().message));
    auto init = sandbox::OpenInitExecutable(SANDRUN_INIT_PATH);
    BOOST_TEST_REQUIRE(init.ok(), (init.ok() ? "" : init.error().message));
    auto built = sandbox::RootTemplate::Build(TemplateDir(), kHostUid + 1, kHostUid + 1);
    BOOST_TEST_REQUIRE(built.ok(), (built.ok() ? "" : built.error().message));
    root_template = std::move(*built);
    launcher = std::make_unique<sandbox::Launcher>(std::move(*filter), std::move(*cgroups),
                                                   root_template->paths(), std::move(*init));
  }
};

// One run's directories on a fresh tmpfs, as the API makes them.
struct Run {
  std::string dir;
  sandbox::SandboxSpec spec;
  explicit Run(const std::string& script) {
    char tmpl[] = "/tmp/sandrun-launcher-test-XXXXXX";
    dir = ::mkdtemp(tmpl);
    ::chmod(dir.c_str(), 0755);
    BOOST_REQUIRE(sys::MakeDirs(dir + "/ws").ok());
    BOOST_REQUIRE(sys::MountTmpfs(dir + "/ws", 16 << 20, kHostUid, kHostUid, 0755).ok());
    spec.argv = {"/bin/bash", "-c", script};
    spec.env = {"PATH=/usr/bin:/bin", "HOME=/home/user", "LANG=C.UTF-8"};
    spec.workspace_dir = dir + "/ws";
    spec.host_uid = kHostUid;
    spec.host_gid = kHostUid;
    spec.run_id = "t" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    spec.limits.wall_time_ms = 5000;
    spec.limits.cpu_time_s = 10;
    spec.limits.cgroup.memory_bytes = 512ull << 20;
    spec.limits.cgroup.processes = 64;
    spec.limits.output_bytes = 1 << 20;
    spec.limits.file_size_bytes = 10ull << 20;
    spec.limits.disk_bytes = 100ull << 20;
  }
  ~Run() {
    (void)sys::Unmount(dir + "/ws");
    (void)sys::RemoveTree(dir);
  }
  static inline int counter = 0;
};

// Processes on the host owned by the sandbox's host uids.
int SandboxProcesses() {
  int n = 0;
  DIR* proc = ::opendir("/proc");
  while (struct dirent* e = ::readdir(proc)) {
    struct stat st;
    std::string path = std::string("/proc/") + e->d_name;
    if (e->d_name[0] < '0' || e->d_name[0] > '9' || ::stat(path.c_str(), &st) != 0) continue;
    if (st.st_uid == kHostUid || st.st_uid == kHostUid + 1) ++n;
  }
  ::closedir(proc);
  return n;
}

// The directory of run `id`'s cgroup: in the hierarchy of `controller` on v1, in the unified
// one on v2 (where DetectCgroups moved this process into <base>/daemon).
std::string RunCgroupDir(const std::string& version, const std::string& controller,
                         const std::string& id) {
  auto self = sys::ReadFile("/proc/self/cgroup");
  if (!self.ok()) return "";
  const std::string key = version == "v1" ? ":" + controller + ":" : "0::";
  const size_t at = self->find(key);
  if (at == std::string::npos) return "";
  const size_t from = at + key.size();
  std::string path = self->substr(from, self->find('\n', from) - from);
  if (path == "/") path.clear();
  if (version == "v1") {
    return "/sys/fs/cgroup/" + controller + path + "/sandrun-launcher-test/" + id;
  }
  return "/sys/fs/cgroup" + path.substr(0, path.rfind("/daemon")) + "/runs/" + id;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(Launcher, LauncherFixture)

// Every field of CgroupLimits reaches its file (memory without swap and, on v1, the socket
// buffers' kmem.tcp limit; pids.max).
BOOST_AUTO_TEST_CASE(cgroup_is_made_with_the_limits_of_the_spec) {
  sandbox::SandboxLimits limits;
  limits.cgroup.memory_bytes = 96ull << 20;
  limits.cgroup.processes = 17;
  const std::string id = "t" + std::to_string(::getpid()) + "-limits";
  auto cgroup = launcher->CreateCgroup(id, limits.cgroup);
  BOOST_TEST_REQUIRE(cgroup.ok(), (cgroup.ok() ? "" : cgroup.error().message));
  BOOST_TEST_REQUIRE(cgroup->get() != nullptr);
  const std::string version = launcher->cgroups()->version();
  const bool v1 = version == "v1";
  auto memory = sys::ReadFile(RunCgroupDir(version, "memory", id) +
                              (v1 ? "/memory.limit_in_bytes" : "/memory.max"));
  auto pids = sys::ReadFile(RunCgroupDir(version, "pids", id) + "/pids.max");
  BOOST_TEST_REQUIRE(memory.ok());
  BOOST_TEST_REQUIRE(pids.ok());
  BOOST_TEST(*memory == std::to_string(96ull << 20) + "\n");
  BOOST_TEST(*pids == "17\n");
  // v1: socket buffers are a counter of their own, bounded by memory_mb less what the socket
  // cap's sockets can be forced to hold (v2: memory.max).
  if (v1) {
    auto tcp =
        sys::ReadFile(RunCgroupDir(version, "memory", id) + "/memory.kmem.tcp.limit_in_bytes");
    BOOST_TEST_REQUIRE(tcp.ok());
    const bool capped = launcher->cgroups()->socket_cap_error().empty();
    const uint64_t want =
        capped ? sandbox::SocketShare::For(96ull << 20).tcp_limit_bytes : 96ull << 20;
    BOOST_TEST(*tcp == std::to_string(want) + "\n");
  }
  BOOST_TEST((*cgroup)->Destroy().ok());
}

// The socket cap's share: the TCP limit plus the forced room of every socket the cap lets live
// (2 x cap: accepted ends count past it) is memory_mb, the forced room at most half of it.
BOOST_AUTO_TEST_CASE(socket_share_adds_up_to_the_memory) {
  using sandbox::SocketShare;
  for (uint64_t mb : {8ull, 16ull, 24ull, 32ull, 512ull, 16384ull}) {
    const SocketShare share = SocketShare::For(mb << 20);
    const uint64_t forced = share.cap * 2 * SocketShare::kForcedBytesPerSocket;
    BOOST_TEST_CONTEXT("memory_mb " << mb) {
      BOOST_TEST(share.cap >= 1);
      BOOST_TEST(share.cap <= SocketShare::kMaxSockets);
      BOOST_TEST(share.tcp_limit_bytes + forced == (mb << 20));
      BOOST_TEST(forced <= (mb << 20) / 2);
    }
  }
  BOOST_TEST(SocketShare::For(32ull << 20).cap == 64);
  BOOST_TEST(SocketShare::For(8ull << 20).cap == 21);
}

BOOST_AUTO_TEST_CASE(runs_as_unprivileged_user_in_own_namespaces) {
  Run run("id -u; id -g; hostname; pwd; ls /home; cat /proc/self/status | grep CapEff");
  auto r = launcher->Run(run.spec);
  BOOST_TEST_REQUIRE(r.ok(), (r.ok() ? "" : r.error().message));
  BOOST_TEST(r->outcome == RunOutcome::kExited);
  BOOST_TEST(r->exit_code == 0);
  BOOST_TEST(r->stdout_text ==
             "1000\n1000\nsandbox\n/home/user\nuser\nCapEff:\t0000000000000000\n");
}

BOOST_AUTO_TEST_CASE(keeps_streams_apart_with_exit_code) {
  Run run("echo out; echo err >&2; exit 3");
  auto r = launcher->Run(run.spec);
  BOOST_TEST_REQUIRE(r.ok());
  BOOST_TEST(r->exit_code == 3);
  BOOST_TEST(r->stdout_text == "out\n");
  BOOST_TEST(r->stderr_text == "err\n");
}

BOOST_AUTO_TEST_CASE(gives_stdin_then_eof) {
  Run run("cat; echo; cat");
  run.spec.stdin_data = "hello";
  auto r = launcher->Run(run.spec);
  BOOST_TEST_REQUIRE(r.ok());
  BOOST_TEST(r->stdout_text == "hello\n");
  Run empty("read x || echo eof");
  r = launcher->Run(empty.spec);
  BOOST_TEST(r->stdout_text == "eof\n");
}

BOOST_AUTO_TEST_CASE(background_job_dies_with_the_run) {
  Run run("sleep 100 & setsid sleep 101 & echo started");
  auto r = launcher->Run(run.spec);
  BOOST_TEST_REQUIRE(r.ok());
  BOOST_TEST(r->outcome == RunOutcome::kExited);
  BOOST_TEST(r->stdout_text == "started\n");
  BOOST_TEST(r->wall_ms < 4000);
  BOOST_TEST(SandboxProcesses() == 0);
}

BOOST_AUTO_TEST_CASE(wall_timeout_kills_everything_and_keeps_output) {
  Run run("echo before; sleep 100 & while :; do :; done");
  run.spec.limits.wall_time_ms = 1000;
  auto r = launcher->Run(run.spec);
  BOOST_TEST_REQUIRE(r.ok());
  BOOST_TEST(r->outcome == RunOutcome::kWallTimeout);
  BOOST_TEST(r->stdout_text == "before\n");
  BOOST_TEST(SandboxProcesses() == 0);
}

BOOST_AUTO_TEST_CASE(output_flood_is_capped) {
  Run run("yes 1234567890");
  run.spec.limits.output_bytes = 64 * 1024;
  auto r = launcher->Run(run.spec);
  BOOST_TEST_REQUIRE(r.ok());
  BOOST_TEST(r->outcome == RunOutcome::kOutputLimit);
  BOOST_TEST(r->stdout_truncated);
  BOOST_TEST(r->stdout_text.size() < 70u * 1024);
  BOOST_TEST(r->stdout_text.find("bytes of output omitted") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(memory_limit_is_detected_from_the_cgroup) {
  Run run("exec python3 -c 'a = bytearray(400 * 1024 * 1024); print(len(a))'");
  run.spec.limits.cgroup.memory_bytes = 64ull << 20;
  auto r = launcher->Run(run.spec);
  BOOST_TEST_REQUIRE(r.ok());
  BOOST_TEST(sandbox::OutcomeName(r->outcome) == std::string("memory_limit"));
}

// The run's first process is cloned by a thread that entered the run's cgroup for the clone
// (cgroup.h EnterCallingThread; v1): while the program runs, its processes are in the run's
// own memory and pids cgroups, and the thread that ran it is back in its own cgroups after.
BOOST_AUTO_TEST_CASE(run_starts_in_its_own_cgroup_and_the_thread_returns) {
  Run run("sleep 1; echo done");
  std::string before, after;
  std::optional<Result<sandbox::SandboxResult>> r;
  auto own_cgroups = [](const char* fallback) {
    auto text = sys::ReadFile("/proc/thread-self/cgroup");
    return text.ok() ? *text : std::string(fallback);
  };
  std::thread worker([&] {
    before = own_cgroups("?");
    r = launcher->Run(run.spec);
    after = own_cgroups("!");
  });
  if (launcher->cgroups()->version() == "v1") {
    // This process's own cgroup in each hierarchy, from /proc/self/cgroup ("N:memory:/path").
    auto self = sys::ReadFile("/proc/self/cgroup");
    BOOST_TEST_REQUIRE(self.ok());
    for (const std::string controller : {"memory", "pids"}) {
      const size_t at = self->find(":" + controller + ":");
      BOOST_TEST_REQUIRE(at != std::string::npos);
      const size_t from = at + controller.size() + 2;
      std::string path = self->substr(from, self->find('\n', from) - from);
      if (path == "/") path.clear();
      const std::string procs = "/sys/fs/cgroup/" + controller + path + "/sandrun-launcher-test/" +
                                run.spec.run_id + "/cgroup.procs";
      bool seen = false;
      for (int i = 0; i < 400 && !seen; ++i) {  // the run lasts a second
        auto text = sys::ReadFile(procs);
        seen = text.ok() && !text->empty();
        if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      BOOST_TEST(seen, "no process in " << procs);
    }
  }
  worker.join();
  BOOST_TEST_REQUIRE(r.has_value());
  BOOST_TEST_REQUIRE(r->ok(), (r->ok() ? "" : r->error().message));
  BOOST_TEST((*r)->stdout_text == "done\n");
  BOOST_TEST(after == before);
}

BOOST_AUTO_TEST_CASE(process_limit_stops_a_fork_loop) {
  Run run("for i in $(seq 1 100); do sleep 5 & done 2>&1 | head -1; echo done");
  run.spec.limits.cgroup.processes = 16;
  auto r = launcher->Run(run.spec);
  BOOST_TEST_REQUIRE(r.ok());
  BOOST_TEST(r->stdout_text.find("Resource temporarily unavailable") != std::string::npos);
  BOOST_TEST(SandboxProcesses() == 0);
}

BOOST_AUTO_TEST_CASE(host_is_out_of_sight) {
  Run run(
      "ls /root 2>&1; ls /var 2>&1; cat /proc/net/dev | tail -n +3 | cut -d: -f1; "
      "ls /proc | grep -c '^[0-9]'; touch /usr/x 2>&1");
  auto r = launcher->Run(run.spec);
  BOOST_TEST_REQUIRE(r.ok());
  BOOST_TEST(r->stdout_text.find("No such file or directory") != std::string::npos);
  BOOST_TEST(r->stdout_text.find("lo\n") != std::string::npos);
  BOOST_TEST(r->stdout_text.find("eth") == std::string::npos);
  BOOST_TEST(r->stdout_text.find("Read-only file system") != std::string::npos);
}

// The root comes from the shared root template (root_template.h): nothing in it is writable
// from a sandbox, not even its empty mount points.
BOOST_AUTO_TEST_CASE(root_from_template_is_read_only) {
  Run run(
      "for p in /x /etc/x /dev/x /usr/x /.oldroot/x /run/x /run/sandrun/env/x; do "
      "touch $p 2>/dev/null && echo wrote $p; done; echo end; "
      "touch /tmp/x /home/user/x /dev/shm/x && echo writable");
  auto r = launcher->Run(run.spec);
  BOOST_TEST_REQUIRE(r.ok());
  BOOST_TEST(r->stdout_text == "end\nwritable\n");
}

// Why the template stays read-only even without seccomp's refusal of mount(2): its mounts,
// copied into a mount namespace of a user namespace, are locked (mount_namespaces(7)): the
// namespace's root may neither remount them writable nor unmount one to uncover the host.
BOOST_AUTO_TEST_CASE(template_mounts_are_locked_in_a_user_namespace) {
  const std::string root = root_template->paths().root;
  const std::string script =
      "unshare -Urm sh -c 'for m in \"\" /usr /etc/ssl /dev; do "
      "mount -o remount,bind,rw " +
      root +
      "$m 2>/dev/null && echo remounted $m; done; "
      "mount -o remount,rw " +
      root +
      " 2>/dev/null && echo superblock; "
      "umount " +
      root +
      "/usr 2>/dev/null && echo unmounted; "
      "touch " +
      root + "/x 2>/dev/null && echo wrote; echo end' 2>&1";
  FILE* pipe = ::popen(script.c_str(), "r");
  BOOST_TEST_REQUIRE(pipe != nullptr);
  std::string out;
  char buf[256];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  BOOST_TEST(::pclose(pipe) == 0);
  BOOST_TEST(out == "end\n");
}

BOOST_AUTO_TEST_CASE(seccomp_refuses_new_namespaces) {
  Run run("unshare -U true 2>&1; unshare -n true 2>&1; echo end");
  auto r = launcher->Run(run.spec);
  BOOST_TEST_REQUIRE(r.ok());
  BOOST_TEST(r->stdout_text.find("Operation not permitted") != std::string::npos);
  BOOST_TEST(r->stdout_text.find("end") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(setup_failure_is_an_error_naming_the_step) {
  Run run("true");
  run.spec.workspace_dir = run.dir + "/missing";
  auto r = launcher->Run(run.spec);
  BOOST_TEST_REQUIRE(!r.ok());
  BOOST_TEST(r.error().message.find("mount step") != std::string::npos);
  BOOST_TEST(r.error().message.find("missing") != std::string::npos);
}

// Launcher::Start (stateful kernels): the sandbox lives past the call, is contained like a
// run, reports how it ended, and Kill leaves nothing behind.
BOOST_AUTO_TEST_CASE(started_sandbox_lives_until_killed_and_leaves_nothing) {
  Run run("echo started; exec sleep 60");
  auto live = launcher->Start(run.spec);
  BOOST_TEST_REQUIRE(live.ok(), (live.ok() ? "" : live.error().message));
  std::string out;
  for (int i = 0; i < 500 && out.empty(); ++i) {
    out += (*live)->DrainOutput();
    ::usleep(10'000);
  }
  BOOST_TEST(out == "started\n");
  BOOST_TEST(!(*live)->Exited());
  BOOST_TEST(SandboxProcesses() > 0);
  (*live)->Kill();
  BOOST_TEST((*live)->Exited());
  BOOST_TEST(SandboxProcesses() == 0);
}

BOOST_AUTO_TEST_CASE(started_sandbox_says_how_it_ended) {
  Run run("exit 3");
  auto live = launcher->Start(run.spec);
  BOOST_TEST_REQUIRE(live.ok());
  for (int i = 0; i < 500 && !(*live)->Exited(); ++i) ::usleep(10'000);
  BOOST_TEST((*live)->ExitDescription() == "exited with code 3");
  Run broken("true");
  broken.spec.workspace_dir = broken.dir + "/missing";
  auto failed = launcher->Start(broken.spec);
  BOOST_TEST_REQUIRE(failed.ok());  // the setup runs in the child: known once it ends
  for (int i = 0; i < 500 && !(*failed)->Exited(); ++i) ::usleep(10'000);
  BOOST_TEST((*failed)->ExitDescription().find("mount step") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(LauncherCpu, LauncherFixture)

BOOST_AUTO_TEST_CASE(cpu_time_of_all_processes_together_is_bounded) {
  // Four busy processes: each stays under RLIMIT_CPU, together they pass the run's limit.
  Run run("for i in 1 2 3 4; do (while :; do :; done) & done; wait");
  run.spec.limits.cpu_time_s = 1;
  run.spec.limits.wall_time_ms = 8000;
  auto r = launcher->Run(run.spec);
  BOOST_TEST_REQUIRE(r.ok());
  BOOST_TEST(r->outcome == RunOutcome::kCpuTimeout);
  BOOST_TEST(r->cpu_ms >= 1000);
  BOOST_TEST(SandboxProcesses() == 0);
}

// A run's usage is its own when its cgroup served another before (an earlier step, a
// session's restore): the counters it starts from are read once a process was ever placed
// there. A new cgroup starts from nothing, read from no file (RunCgroup::BaseStats).
BOOST_AUTO_TEST_CASE(a_second_run_in_one_cgroup_counts_only_its_own_cpu_time) {
  // Busy until its own CPU time (utime + stime, in ticks of 1/100 s) reaches 0.4 s.
  Run busy("while read -r -a f < /proc/$BASHPID/stat; ((f[13] + f[14] < 40)); do :; done");
  auto cgroup = launcher->CreateCgroup(busy.spec.run_id, busy.spec.limits.cgroup);
  BOOST_TEST_REQUIRE(cgroup.ok(), (cgroup.ok() ? "" : cgroup.error().message));
  const sandbox::CgroupStats fresh = (*cgroup)->BaseStats();
  BOOST_TEST(fresh.cpu_usage_ms == 0);
  BOOST_TEST(fresh.oom_kills == 0);
  BOOST_TEST(fresh.pids_limit_hits == 0);
  auto first = launcher->Run(busy.spec, cgroup->get());
  BOOST_TEST_REQUIRE(first.ok());
  BOOST_TEST(first->cpu_ms >= 300, "0.4 s of busy loop: " << first->cpu_ms);
  (*cgroup)->ReapExiting();  // init may still be exiting, its CPU time still counting
  const int64_t after = (*cgroup)->Stats().cpu_usage_ms;
  BOOST_TEST((*cgroup)->BaseStats().cpu_usage_ms == after);
  BOOST_TEST((*cgroup)->CpuUsageMs() == after);
  Run idle("true");
  auto second = launcher->Run(idle.spec, cgroup->get());
  BOOST_TEST_REQUIRE(second.ok());
  BOOST_TEST(second->cpu_ms < 200, "the first run's CPU time is not the second's");
  BOOST_TEST((*cgroup)->Destroy().ok());
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// Mounts of this mount namespace at or below `dir`.
int MountsBelow(const std::string& dir) {
  std::ifstream mountinfo("/proc/self/mountinfo");
  int n = 0;
  for (std::string line; std::getline(mountinfo, line);) {
    if (line.find(" " + dir + "/") != std::string::npos) ++n;
  }
  return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(RootTemplate)

// A daemon killed with its template mounted (no destructor ran): the next one's Build detaches
// the leftover and builds afresh, and its destructor leaves nothing.
BOOST_AUTO_TEST_CASE(build_sweeps_a_killed_daemons_template_and_destructor_removes_it) {
  BOOST_TEST_REQUIRE(::geteuid() == 0, "the root template needs root (mounts)");
  const std::string dir = TemplateDir() + "-sweep";
  auto first = sandbox::RootTemplate::Build(dir, kHostUid + 1, kHostUid + 1);
  BOOST_TEST_REQUIRE(first.ok(), (first.ok() ? "" : first.error().message));
  const int mounts = MountsBelow(dir);
  BOOST_TEST(mounts > 5);
  (void)first->release();  // as SIGKILL: never destroyed
  {
    auto second = sandbox::RootTemplate::Build(dir, kHostUid + 1, kHostUid + 1);
    BOOST_TEST_REQUIRE(second.ok(), (second.ok() ? "" : second.error().message));
    BOOST_TEST(MountsBelow(dir) == mounts);
    struct stat st;
    BOOST_TEST_REQUIRE(::stat(((*second)->paths().root + "/etc/passwd").c_str(), &st) == 0);
    BOOST_TEST(st.st_uid == kHostUid + 1);
  }
  BOOST_TEST(MountsBelow(dir) == 0);
  BOOST_TEST(::access(dir.c_str(), F_OK) != 0);
}

BOOST_AUTO_TEST_SUITE_END()
