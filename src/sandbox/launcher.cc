#include "sandbox/launcher.h"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "sandbox/child.h"
#include "sandbox/mounts.h"
#include "sys/syscalls.h"
#include "util/text.h"

namespace sandrun::sandbox {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uid_t kInsideUid = 1000;
constexpr gid_t kInsideGid = 1000;
constexpr size_t kChildStackBytes = 256 * 1024;

std::vector<const char*> CStrings(const std::vector<std::string>& in) {
  std::vector<const char*> out;
  for (const auto& s : in) out.push_back(s.c_str());
  out.push_back(nullptr);
  return out;
}

std::vector<RlimitSetting> Rlimits(const SandboxLimits& limits, bool have_cgroups) {
  auto both = [](rlim_t v) { return rlimit{v, v}; };
  std::vector<RlimitSetting> out = {
      // SIGXCPU at the soft limit, SIGKILL one second later (setrlimit(2)).
      {RLIMIT_CPU,
       {static_cast<rlim_t>(limits.cpu_time_s), static_cast<rlim_t>(limits.cpu_time_s + 1)}},
      {RLIMIT_FSIZE, both(limits.file_size_bytes)},
      {RLIMIT_NOFILE, both(static_cast<rlim_t>(limits.open_files))},
      {RLIMIT_CORE, both(0)},
      {RLIMIT_MEMLOCK, both(64 * 1024)},
      {RLIMIT_MSGQUEUE, both(0)},
  };
  if (!have_cgroups) {
    // Weaker stand-ins: address space (not resident memory) and processes per uid.
    out.push_back({RLIMIT_AS, both(limits.memory_bytes)});
    out.push_back({RLIMIT_NPROC, both(static_cast<rlim_t>(limits.processes))});
  }
  return out;
}

Status WriteIdMaps(pid_t pid, uid_t host_uid, gid_t host_gid) {
  // user_namespaces(7): lines "inside-id host-id count", written by a privileged parent
  // (so no "setgroups deny" is needed). Inside root (the namespace's init, which builds the
  // mounts; files it creates need a mapped owner, else EOVERFLOW) maps to host id + 1, the
  // sandbox user 1000 to the host id itself. Neither is a privileged host id.
  std::string proc = "/proc/" + std::to_string(pid);
  auto map = [](unsigned inside_user, unsigned host) {
    return "0 " + std::to_string(host + 1) + " 1\n" + std::to_string(inside_user) + " " +
           std::to_string(host) + " 1\n";
  };
  Status s = sys::WriteFile(proc + "/uid_map", map(kInsideUid, host_uid));
  if (!s.ok()) return s;
  return sys::WriteFile(proc + "/gid_map", map(kInsideGid, host_gid));
}

// Reads what is available on `fd` into `buffer`; returns false at EOF or error.
bool Drain(int fd, util::HeadTailBuffer& buffer) {
  char chunk[65536];
  for (;;) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n > 0) {
      buffer.Append(std::string_view(chunk, static_cast<size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    return false;
  }
}

struct Pipes {
  sys::Pipe in, out, err, report, sync;
};

}  // namespace

const char* OutcomeName(RunOutcome outcome) {
  switch (outcome) {
    case RunOutcome::kExited:
      return "exited";
    case RunOutcome::kSignaled:
      return "signaled";
    case RunOutcome::kWallTimeout:
      return "wall_timeout";
    case RunOutcome::kCpuTimeout:
      return "cpu_timeout";
    case RunOutcome::kMemoryLimit:
      return "memory_limit";
    case RunOutcome::kOutputLimit:
      return "output_limit";
  }
  return "unknown";
}

Launcher::Launcher(SeccompFilter filter, std::unique_ptr<CgroupManager> cgroups)
    : filter_(std::move(filter)), cgroups_(std::move(cgroups)) {}

Result<SandboxResult> Launcher::Run(const SandboxSpec& spec) const {
  if (spec.argv.empty() || spec.argv[0].empty() || spec.argv[0][0] != '/') {
    return MakeError("sandbox", "argv[0] must be an absolute path inside the sandbox");
  }
  MountPlan mounts = BuildMountPlan(spec);
  std::vector<const char*> argv = CStrings(spec.argv);
  std::vector<const char*> envp = CStrings(spec.env);
  std::vector<RlimitSetting> rlimits = Rlimits(spec.limits, cgroups_ != nullptr);
  std::string put_old = spec.root_dir + "/.oldroot";

  Pipes p;
  for (sys::Pipe* pipe : {&p.in, &p.out, &p.err, &p.report, &p.sync}) {
    auto made = sys::MakePipe();
    if (!made.ok()) return made.error();
    *pipe = std::move(*made);
  }
  // The program's own streams belong to the sandbox user, so that /dev/stdout and friends
  // (links to /proc/self/fd/N) open as on any Linux box.
  for (const sys::Pipe* pipe : {&p.in, &p.out, &p.err}) {
    if (Status s = sys::ChownPipe(*pipe, spec.host_uid, spec.host_gid); !s.ok()) return s.error();
  }

  std::unique_ptr<RunCgroup> cgroup;
  if (cgroups_) {
    auto created = cgroups_->Create(spec.run_id, spec.limits.memory_bytes, spec.limits.processes);
    if (!created.ok()) return MakeError("sandbox", "cgroup: " + created.error().message);
    cgroup = std::move(*created);
  }

  ChildPlan plan{};
  plan.stdin_fd = p.in.read.get();
  plan.stdout_fd = p.out.write.get();
  plan.stderr_fd = p.err.write.get();
  plan.report_fd = p.report.write.get();
  plan.sync_fd = p.sync.read.get();
  plan.root_dir = spec.root_dir.c_str();
  plan.put_old = put_old.c_str();
  plan.old_root_inside = "/.oldroot";
  plan.mount_steps = mounts.steps.data();
  plan.mount_step_count = mounts.steps.size();
  plan.hostname = "sandbox";
  plan.uid = kInsideUid;
  plan.gid = kInsideGid;
  plan.rlimits = rlimits.data();
  plan.rlimit_count = rlimits.size();
  plan.workdir = "/home/user";
  plan.program = argv[0];
  plan.argv = argv.data();
  plan.envp = envp.data();
  plan.seccomp_program = filter_.program();

  // The child gets a copy of this stack; ours can go right after clone returns.
  std::vector<char> stack(kChildStackBytes);
  int pidfd_raw = -1;
  const auto start = Clock::now();
  pid_t pid = ::clone(ChildMain, stack.data() + stack.size(),
                      CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC |
                          CLONE_NEWUTS | CLONE_PIDFD | SIGCHLD,
                      &plan, &pidfd_raw);
  if (pid < 0) return sys::ErrnoError("sandbox", "clone(CLONE_NEWUSER|CLONE_NEWPID|...)");
  sys::UniqueFd pidfd(pidfd_raw);
  // Close the child's ends now so EOF means "every process of the run is gone".
  p.in.read.Reset();
  p.out.write.Reset();
  p.err.write.Reset();
  p.report.write.Reset();
  p.sync.read.Reset();

  auto abort_child = [&](const Error& e) -> Error {
    sys::KillPidfd(pidfd.get());
    (void)sys::Reap(pid);
    return MakeError("sandbox", e.message, e.err);
  };
  if (Status s = WriteIdMaps(pid, spec.host_uid, spec.host_gid); !s.ok()) {
    return abort_child(s.error());
  }
  // Keep the OOM killer off our init: the program, not the reaper, should be chosen.
  (void)sys::WriteFile("/proc/" + std::to_string(pid) + "/oom_score_adj", "-1000");
  if (cgroup) {
    if (Status s = cgroup->AddProcess(pid); !s.ok()) return abort_child(s.error());
  }
  if (!sys::WriteAll(p.sync.write.get(), "G", 1)) {
    return abort_child(sys::ErrnoError("sandbox", "write sync pipe"));
  }
  p.sync.write.Reset();

  // I/O loop: feed stdin, capture both streams with a shared byte cap, watch the deadline.
  const uint64_t cap = spec.limits.output_bytes;
  util::HeadTailBuffer out(cap * 3 / 8, cap / 8), err(cap * 3 / 8, cap / 8);
  for (int fd : {p.out.read.get(), p.err.read.get(), p.in.write.get()}) {
    (void)sys::SetNonBlocking(fd);
  }
  size_t stdin_written = 0;
  if (spec.stdin_data.empty()) p.in.write.Reset();
  bool out_open = true, err_open = true, exited = false, timed_out = false, flooded = false;
  bool cpu_out = false;
  const int64_t cpu_limit_ms = spec.limits.cpu_time_s * 1000;
  auto next_cpu_check = start;
  ChildReport report{};
  bool have_report = false;
  const auto deadline = start + std::chrono::milliseconds(spec.limits.wall_time_ms);
  while (out_open || err_open || !exited) {
    pollfd fds[4];
    int n = 0;
    int i_out = -1, i_err = -1, i_pid = -1, i_in = -1;
    if (out_open) {
      i_out = n;
      fds[n++] = {p.out.read.get(), POLLIN, 0};
    }
    if (err_open) {
      i_err = n;
      fds[n++] = {p.err.read.get(), POLLIN, 0};
    }
    if (!exited) {
      i_pid = n;
      fds[n++] = {pidfd.get(), POLLIN, 0};
    }
    if (p.in.write.valid()) {
      i_in = n;
      fds[n++] = {p.in.write.get(), POLLOUT, 0};
    }
    auto now = Clock::now();
    int timeout_ms = 1000;
    if (!exited) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
      // Wake at least every 100 ms to check the run's CPU time.
      timeout_ms = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(left, 100)));
    }
    int ready = ::poll(fds, static_cast<nfds_t>(n), timeout_ms);
    if (ready < 0 && errno != EINTR) break;
    if (i_out >= 0 && fds[i_out].revents) out_open = Drain(p.out.read.get(), out);
    if (i_err >= 0 && fds[i_err].revents) err_open = Drain(p.err.read.get(), err);
    if (i_in >= 0 && fds[i_in].revents) {
      ssize_t w = ::write(p.in.write.get(), spec.stdin_data.data() + stdin_written,
                          spec.stdin_data.size() - stdin_written);
      if (w > 0) stdin_written += static_cast<size_t>(w);
      if ((w < 0 && errno != EAGAIN && errno != EINTR) || stdin_written == spec.stdin_data.size()) {
        p.in.write.Reset();
      }
    }
    if (i_pid >= 0 && fds[i_pid].revents) exited = true;
    if (!exited && !flooded && out.total_bytes() + err.total_bytes() > cap) {
      flooded = true;
      sys::KillPidfd(pidfd.get());
    }
    if (!exited && !timed_out && Clock::now() >= deadline) {
      timed_out = true;
      sys::KillPidfd(pidfd.get());
    }
    // CPU time of the whole run (all its processes and threads), which RLIMIT_CPU (per
    // process) cannot bound: checked from the cgroup between polls.
    if (!exited && !cpu_out && cgroup && Clock::now() >= next_cpu_check) {
      next_cpu_check = Clock::now() + std::chrono::milliseconds(100);
      if (cgroup->Stats().cpu_usage_ms > cpu_limit_ms) {
        cpu_out = true;
        sys::KillPidfd(pidfd.get());
      }
    }
    if (exited && (out_open || err_open) && ready == 0) break;  // writers gone yet no EOF: give up
  }
  p.in.write.Reset();
  // The report (if any) is in the pipe now: init wrote it before exiting.
  (void)sys::SetNonBlocking(p.report.read.get());
  ssize_t got = ::read(p.report.read.get(), &report, sizeof report);
  have_report = got == static_cast<ssize_t>(sizeof report);
  auto reaped = sys::Reap(pid);
  const auto end = Clock::now();
  CgroupStats stats;
  if (cgroup) {
    stats = cgroup->Stats();
    (void)cgroup->Destroy();
  }

  if (have_report && report.kind == ChildReport::kSetupFailed) {
    std::string step = ChildStepName(report.step);
    if (report.step == ChildStep::kMountStep && report.detail >= 0 &&
        static_cast<size_t>(report.detail) < mounts.descriptions.size()) {
      step += " (" + mounts.descriptions[static_cast<size_t>(report.detail)] + ")";
    }
    return MakeError("sandbox",
                     "sandbox setup failed at " + step + ": " + std::strerror(report.err),
                     report.err);
  }

  SandboxResult result;
  result.wall_ms = std::chrono::duration_cast<std::chrono::milliseconds>(end - start).count();
  if (reaped.ok()) {
    const rusage& ru = reaped->usage;
    result.cpu_ms = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
                    (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
    result.max_rss_kb = ru.ru_maxrss;
  }
  if (stats.cpu_usage_ms >= 0) result.cpu_ms = stats.cpu_usage_ms;
  if (stats.peak_memory_kb >= 0) result.max_rss_kb = stats.peak_memory_kb;
  result.process_limit_hits = stats.pids_limit_hits;
  result.stdout_text = out.Text();
  result.stderr_text = err.Text();
  result.stdout_truncated = out.truncated();
  result.stderr_truncated = err.truncated();

  int ws = have_report ? report.wait_status : 0;
  if (have_report && WIFEXITED(ws)) result.exit_code = WEXITSTATUS(ws);
  if (have_report && WIFSIGNALED(ws)) result.signal = WTERMSIG(ws);
  if (flooded) {
    result.outcome = RunOutcome::kOutputLimit;
  } else if (timed_out) {
    result.outcome = RunOutcome::kWallTimeout;
  } else if (cpu_out) {
    result.outcome = RunOutcome::kCpuTimeout;
  } else if (stats.oom_kills > 0) {
    result.outcome = RunOutcome::kMemoryLimit;
  } else if (!have_report) {
    // Init died without a report: only a kill from outside does that.
    result.outcome = RunOutcome::kSignaled;
    result.signal = SIGKILL;
  } else if (WIFSIGNALED(ws) &&
             (result.signal == SIGXCPU ||
              (result.signal == SIGKILL && result.cpu_ms >= spec.limits.cpu_time_s * 1000))) {
    result.outcome = RunOutcome::kCpuTimeout;
  } else if (WIFSIGNALED(ws)) {
    result.outcome = RunOutcome::kSignaled;
  } else {
    result.outcome = RunOutcome::kExited;
  }
  return result;
}

}  // namespace sandrun::sandbox
