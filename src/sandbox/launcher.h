// Launcher: the parent side of one sandboxed run. Thread-safe: one Launcher serves all
// worker threads; each Run() call builds and destroys its own sandbox.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sandbox/cgroup.h"
#include "sandbox/network_rules.h"
#include "sandbox/result.h"
#include "sandbox/seccomp.h"
#include "sandbox/spec.h"
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

// The cgroup limits of a sandbox with `limits` (memory without swap, pids.max). Pure.
CgroupLimits CgroupLimitsFor(const SandboxLimits& limits);

// A host helper program run by RunHelper.
struct HelperResult {
  int wait_status = 0;
  bool memory_limit = false;  // the OOM killer acted in the cgroup while the helper ran
  std::string stdout_text;    // at most 64 MiB
  std::string stderr_text;    // at most 64 KiB
};

// A sandbox started by Launcher::Start and not waited for: a long-lived program (a Jupyter
// kernel, src/kernel/) with every containment of a run — namespaces, seccomp filter,
// rlimits, its cgroup — but no wall-clock limit of its own. Owns init's pid and pidfd, the
// lifeline (a dead daemon still kills it) and the cgroup; the destructor calls Kill().
// limits.output_bytes bounds what DrainOutput keeps. Not thread-safe (one owner at a time);
// not safe after fork.
class LiveSandbox {
 public:
  struct State;
  explicit LiveSandbox(std::unique_ptr<State> state);
  ~LiveSandbox();
  LiveSandbox(const LiveSandbox&) = delete;
  LiveSandbox& operator=(const LiveSandbox&) = delete;

  // True once the sandbox's init has exited (the program ended, was killed, or setup
  // failed). Does not block.
  bool Exited() const;
  // The pidfd of init: readable (POLLIN) when it exits.
  int pidfd() const;
  // The cgroup's counters since it was made (all -1/0 without cgroups).
  CgroupStats Stats() const;
  // Bytes of IP packets through its network so far (RunNetwork::Usage); -1 each without
  // the network or after Kill().
  CounterBytes NetworkUsage() const;
  // What the program wrote on its own stdout and stderr since the last call (the first
  // limits.output_bytes bytes kept, the rest dropped). Does not block.
  std::string DrainOutput();
  // After Exited(): why it ended ("exited with code N", "killed by signal N", "sandbox
  // setup failed at STEP: strerror"); "" while it runs.
  std::string ExitDescription();
  // SIGKILL to init (its pid namespace goes with it), reaps it, removes the cgroup.
  // Idempotent.
  void Kill();

 private:
  std::unique_ptr<State> state_;
};

// A sandbox started ahead of its run (issue 11 part 2, the warm pool): built like a run's
// sandbox — namespaces, mounts, rlimits, seccomp filter, in the cgroup it was given — with its
// program started and blocked reading the first line of its stdin (a warm start line: see
// api/warm_pool.h). Launcher::RunWaiting serves exactly one run with it; unused, the
// destructor kills and reaps it (the cgroup stays: the caller owns it). Not thread-safe (one
// owner at a time); not safe after fork.
class WaitingSandbox {
 public:
  struct State;
  explicit WaitingSandbox(std::unique_ptr<State> state);
  ~WaitingSandbox();
  WaitingSandbox(const WaitingSandbox&) = delete;
  WaitingSandbox& operator=(const WaitingSandbox&) = delete;

  // True once it has ended while waiting (killed from outside, or its setup failed): it
  // cannot serve a run. Does not block.
  bool Exited() const;
  // Its setup failure or exit, once Exited() ("" before).
  std::string ExitDescription();
  // Whether RunWaiting has used it.
  bool used() const;

 private:
  friend class Launcher;
  std::unique_ptr<State> state_;
};

class Launcher {
 public:
  // `cgroups` may be null (require_cgroups = false): memory is then capped by RLIMIT_AS and
  // processes by RLIMIT_NPROC, which are weaker (per process / per uid across runs).
  // `init_exe`: sandrun-init opened by OpenInitExecutable.
  Launcher(SeccompFilter filter, std::unique_ptr<CgroupManager> cgroups, sys::UniqueFd init_exe);

  // Runs spec.argv in a new sandbox and waits for it (at most the wall-time limit plus
  // a short grace period). The program's fate is data in SandboxResult; an Error (code
  // "sandbox") means the sandbox could not be built, and its message names the failed step
  // and errno. Not safe after fork.
  Result<SandboxResult> Run(const SandboxSpec& spec) const;
  // Like Run(spec), in the existing `cgroup` (from CreateCgroup; null without cgroups): the
  // child is placed there and the cgroup is left in place. What the run observed of the
  // cgroup (OOM kills, CPU time, refused forks) counts from the clone on, so a process run
  // in it before (an earlier step, the session's restore) does not make this run's outcome;
  // its memory still counts (a tmpfs page it wrote stays charged). peak memory is the
  // cgroup's peak so far. Not safe after fork.
  Result<SandboxResult> Run(const SandboxSpec& spec, RunCgroup* cgroup) const;

  // The cgroup of run `run_id` with `limits` (CgroupLimitsFor(spec.limits) for a spec), for a
  // caller that runs several processes in it one after the
  // other (a session's restore, then each step of the run: issue 10 item 4), so that what
  // one leaves charged counts against the next. Null without cgroups. The caller owns it;
  // remove it (destroy it) once its last process is reaped and, so its charges go with it,
  // after the tmpfs filled from inside it is unmounted. Errors: kSystem. Not safe after fork.
  Result<std::unique_ptr<RunCgroup>> CreateCgroup(const std::string& run_id,
                                                  const CgroupLimits& limits) const;

  // Runs `argv` (a host program, as the daemon's user, outside every namespace) in the
  // run's `cgroup` (CreateCgroup), so the memory it uses — the tmpfs pages it writes
  // included — is charged to the run, and stays charged there while the run's steps run
  // (issue 10 item 4). The cgroup is left in place. The helper must read one byte from its
  // fd 3 before working: it is moved into the cgroup first. With a null `cgroup` (no
  // cgroups) it runs unconfined. Errors: kSystem when it cannot be started. Not safe
  // after fork.
  Result<HelperResult> RunHelper(const std::vector<std::string>& argv, RunCgroup* cgroup) const;

  // Starts spec.argv in a new sandbox like Run, without waiting for it and without a
  // wall-clock limit (spec.limits.wall_time_ms is not used): the caller supervises it.
  // stdin is empty (EOF). Errors as Run's. Not safe after fork.
  Result<std::unique_ptr<LiveSandbox>> Start(const SandboxSpec& spec) const;
  // Like Start(spec), in `cgroup` (CreateCgroup; null without cgroups), which the
  // LiveSandbox then owns and removes with Kill().
  Result<std::unique_ptr<LiveSandbox>> Start(const SandboxSpec& spec,
                                             std::unique_ptr<RunCgroup> cgroup) const;

  // Starts spec.argv in a new sandbox in `cgroup` (CreateCgroup; null without cgroups; the
  // caller keeps it and removes it after the sandbox is gone) and leaves it waiting: its
  // stdin stays open and nothing is written to it, no limit of the run is watched yet (the
  // cgroup's and the rlimits are those of `spec`). Errors as Run's. Not safe after fork.
  Result<std::unique_ptr<WaitingSandbox>> StartWaiting(const SandboxSpec& spec,
                                                       RunCgroup* cgroup) const;
  // Serves one run with `sandbox`: writes the memory and process limits of spec.limits to
  // its cgroup, sends `start_line` (ending in '\n') and then spec.stdin_data on its stdin, and
  // supervises it as Run does with spec.limits (wall-clock time from now; CPU time, OOM kills
  // and refused forks counted from now, so what the waiting program did before is not the
  // run's). Only limits, stdin and the start line come from `spec`: argv, mounts and the
  // rest are the sandbox's own. Errors ("sandbox"): the sandbox was used or has ended, or
  // its cgroup refused the limits (memory in use already above them). Not safe after fork.
  Result<SandboxResult> RunWaiting(WaitingSandbox& sandbox, const std::string& start_line,
                                   const SandboxSpec& spec) const;

  const CgroupManager* cgroups() const { return cgroups_.get(); }

 private:
  SeccompFilter filter_;
  std::unique_ptr<CgroupManager> cgroups_;
  sys::UniqueFd init_exe_;
};

// sandrun-init beside the running executable (/proc/self/exe), or `configured` when not
// empty, opened for execveat. Errors name the path and say how to install it.
Result<sys::UniqueFd> OpenInitExecutable(const std::string& configured = "");

}  // namespace sandrun::sandbox
