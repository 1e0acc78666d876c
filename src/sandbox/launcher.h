// Launcher: the parent side of one sandboxed run. Thread-safe: one Launcher serves all
// worker threads; each Run() call builds and destroys its own sandbox.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sandbox/cgroup.h"
#include "sandbox/mounts.h"
#include "sandbox/net_namespace_pool.h"
#include "sandbox/network_rules.h"
#include "sandbox/result.h"
#include "sandbox/runner.h"
#include "sandbox/seccomp.h"
#include "sandbox/spec.h"
#include "sandbox/user_limits.h"
#include "sandbox/zygote.h"
#include "sys/unique_fd.h"
#include "util/result.h"

namespace sandrun::sandbox {

// What the supervision of one run observed, for ClassifyOutcome.
struct RunFacts {
  bool flooded = false;    // we stopped it: output cap
  bool timed_out = false;  // we stopped it: wall-clock limit
  bool cpu_out = false;    // we stopped it: the cgroup's CPU time passed the limit
  int64_t oom_kills = 0;   // the kernel's OOM killer acted in the run's cgroup
  bool have_report = false;
  int wait_status = 0;  // the program's, from init's report
  int64_t cpu_ms = 0;
  int64_t cpu_limit_ms = 0;
};

// The run's outcome from what was observed. Precedence: our own stops first, in the order
// they can cause one another — a flood is stopped at once (so it is never a timeout), a wall
// timeout may coincide with CPU use, CPU is checked only every 100 ms — then the kernel's
// OOM kill (its SIGKILL would otherwise read as a plain signal), then a missing report (init
// was killed from outside), then the program's own status (SIGXCPU / SIGKILL past the CPU
// limit is RLIMIT_CPU). Pure.
RunOutcome ClassifyOutcome(const RunFacts& facts);

// Network namespaces a Launcher keeps ready: a few runs starting at once find one each, and
// one is made in ~1 ms, far less than a run takes.
constexpr size_t kNetNamespacesReady = 4;

class Launcher : public SandboxRunner {
 public:
  using SandboxRunner::Run;
  using SandboxRunner::Start;

  // `cgroups` may be null (require_cgroups = false): memory is then capped by RLIMIT_AS and
  // processes by RLIMIT_NPROC, which are weaker (per process / per uid across runs).
  // `root_template`: the paths of a RootTemplate (root_template.h) that outlives every
  // sandbox this launcher starts (each one's new root). `init_exe`: sandrun-init opened by
  // OpenInitExecutable.
  Launcher(SeccompFilter filter, std::unique_ptr<CgroupManager> cgroups,
           RootTemplatePaths root_template, sys::UniqueFd init_exe);

  // Run(spec) (SandboxRunner): runs spec.argv in a new sandbox and waits for it (at most the
  // wall-time limit plus a short grace period). The program's fate is data in SandboxResult;
  // an Error (code "sandbox") means the sandbox could not be built, and its message names
  // the failed step and errno. Not safe after fork.
  // Like Run(spec), in the existing `cgroup` (from CreateCgroup; null without cgroups): the
  // child is placed there and the cgroup is left in place. What the run observed of the
  // cgroup (OOM kills, CPU time, refused forks) counts from the clone on, so a process run
  // in it before (an earlier step, the session's restore) does not make this run's outcome;
  // its memory still counts (a tmpfs page it wrote stays charged). peak memory is the
  // cgroup's peak so far. Not safe after fork.
  Result<SandboxResult> Run(const SandboxSpec& spec, RunCgroup* cgroup) const override;

  // The cgroup of run `run_id` with `limits` (spec.limits.cgroup for a spec), for a
  // caller that runs several processes in it one after the
  // other (a session's restore, then each step of the run), so that what
  // one leaves charged counts against the next. Null without cgroups. The caller owns it;
  // remove it (destroy it) once its last process is reaped and, so its charges go with it,
  // after the tmpfs filled from inside it is unmounted. Errors: kSystem. Not safe after fork.
  Result<std::unique_ptr<RunCgroup>> CreateCgroup(const std::string& run_id,
                                                  const CgroupLimits& limits) const override;

  // Runs `argv` (a host program, as the daemon's user, outside every namespace) in the
  // run's `cgroup` (CreateCgroup), so the memory it uses — the tmpfs pages it writes
  // included — is charged to the run, and stays charged there while the run's steps run.
  // The cgroup is left in place. The helper must read one byte from its
  // fd 3 before working: it is moved into the cgroup first. With a null `cgroup` (no
  // cgroups) it runs unconfined. Errors: kSystem when it cannot be started. Not safe
  // after fork.
  Result<HelperResult> RunHelper(const std::vector<std::string>& argv,
                                 RunCgroup* cgroup) const override;

  // Start(spec) (SandboxRunner): starts spec.argv in a new sandbox like Run, without waiting
  // for it and without a wall-clock limit (spec.limits.wall_time_ms is not used): the caller
  // supervises it. stdin is empty (EOF). Errors as Run's. Not safe after fork.
  // Like Start(spec), in `cgroup` (CreateCgroup; null without cgroups), which the
  // LiveSandbox then owns and removes with Kill().
  Result<std::unique_ptr<LiveSandbox>> Start(const SandboxSpec& spec,
                                             std::unique_ptr<RunCgroup> cgroup) const override;

  // Starts spec.argv in a new sandbox in `cgroup` and leaves it waiting (SandboxRunner).
  Result<std::unique_ptr<WaitingSandbox>> StartWaiting(const SandboxSpec& spec,
                                                       RunCgroup* cgroup) const override;
  // Serves one run with a waiting sandbox (SandboxRunner).
  Result<SandboxResult> RunWaiting(WaitingSandbox& sandbox, const std::string& start_line,
                                   const SandboxSpec& spec) const override;

  const CgroupManager* cgroups() const override { return cgroups_.get(); }

  // The per-user-namespace limits each sandbox's init writes in its own namespace
  // (user_limits.h: ApplyUserLimitShares); DefaultUserSysctls() until set. Call before the
  // first sandbox starts (not thread-safe).
  void set_user_sysctls(UserSysctls sysctls) { user_sysctls_ = std::move(sysctls); }
  NetNamespaceStats net_namespace_stats() const override { return net_namespaces_.stats(); }
  ZygoteStats zygote_stats(ZygoteKind kind) const override {
    const Zygote* z = zygote(kind);
    return z != nullptr ? z->stats() : ZygoteStats{};
  }
  // The zygote of `kind` that starts the sandboxes whose spec asks for it
  // (SandboxSpec::zygote); none by default. Call before the first sandbox starts (not
  // thread-safe).
  void set_zygote(ZygoteKind kind, std::unique_ptr<Zygote> zygote) {
    zygotes_[static_cast<int>(kind)] = std::move(zygote);
  }
  const Zygote* zygote(ZygoteKind kind) const { return zygotes_[static_cast<int>(kind)].get(); }

 private:
  // The zygote that starts `spec`'s sandbox; null: it execs its argv.
  Zygote* ZygoteFor(const SandboxSpec& spec) const {
    return zygotes_[static_cast<int>(spec.zygote)].get();
  }
  SeccompFilter filter_;
  std::unique_ptr<CgroupManager> cgroups_;
  RootTemplatePaths root_template_;
  sys::UniqueFd init_exe_;
  UserSysctls user_sysctls_ = DefaultUserSysctls();
  std::unique_ptr<Zygote> zygotes_[kZygoteKinds];  // by ZygoteKind; kNone's stays empty
  // Network namespaces of runs without network, made ahead (net_namespace_pool.h).
  mutable NetNamespacePool net_namespaces_{kNetNamespacesReady};
};

// sandrun-init beside the running executable (/proc/self/exe), or `configured` when not
// empty, opened for execveat. Errors name the path and say how to install it.
Result<sys::UniqueFd> OpenInitExecutable(const std::string& configured = "");
// Its path: `configured`, or sandrun-init beside the running executable. Errors: kSystem.
Result<std::string> InitExecutablePath(const std::string& configured = "");

}  // namespace sandrun::sandbox
