// SandboxRunner: what the rest of the daemon asks of the sandbox (runs, helpers, live
// sandboxes, cgroups), as an interface. Launcher (launcher.h) is the real one; the api's
// unit tests put a fake in its place, so the run pipeline is tested without root.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sandbox/cgroup.h"
#include "sandbox/net_namespace_pool.h"
#include "sandbox/network_rules.h"
#include "sandbox/result.h"
#include "sandbox/spec.h"
#include "sandbox/zygote.h"
#include "util/result.h"

namespace sandrun::sandbox {

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
  // Freezes (true) or thaws (false) every process of the sandbox (RunCgroup::Freeze; the
  // cgroup made with CgroupLimits::freezable). Errors: no cgroup, or as Freeze's.
  Status Freeze(bool frozen);
  // The sandbox's cgroup (null without cgroups, or after Kill()), for a helper of the
  // sandbox (RunHelper) or a rename; the sandbox keeps owning it.
  RunCgroup* cgroup() const;
  // SIGKILL to init (its pid namespace goes with it), thaws a frozen sandbox so that it
  // dies, reaps it, removes the cgroup. Idempotent.
  void Kill();

 private:
  std::unique_ptr<State> state_;
};

// A sandbox started ahead of its run (the warm pool): built like a run's
// sandbox — namespaces, mounts, rlimits, seccomp filter, in the cgroup it was given — with its
// program started and blocked reading the first line of its stdin (a warm start line: see
// run/warm_pool.h). SandboxRunner::RunWaiting serves exactly one run with it; unused, the
// destructor kills and reaps it (the cgroup stays: the caller owns it). Not thread-safe (one
// owner at a time); not safe after fork.
// The byte a waiting program writes on its stdout once it is ready for its start line
// (ASCII ACK); StartWaiting reads it, so it is never part of a run's output.
inline constexpr char kWarmReadyByte = '\x06';

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
  friend class Launcher;  // the implementation that fills State
  std::unique_ptr<State> state_;
};

// The operations of Launcher the api and kernel layers use. Implementations are
// thread-safe: one serves all worker threads. None is safe after fork.
class SandboxRunner {
 public:
  virtual ~SandboxRunner() = default;

  // Runs spec.argv in a new sandbox, in the existing `cgroup` (from CreateCgroup; null
  // without cgroups), and waits for it (at most the wall-time limit plus a short grace
  // period). The program's fate is data in SandboxResult; an Error (code "sandbox") means
  // the sandbox could not be built, and its message names the failed step and errno.
  virtual Result<SandboxResult> Run(const SandboxSpec& spec, RunCgroup* cgroup) const = 0;
  // Like Run(spec, cgroup) in a cgroup of its own (CreateCgroup with
  // spec.limits.cgroup), removed after the run.
  Result<SandboxResult> Run(const SandboxSpec& spec) const;

  // The cgroup of run `run_id` with `limits`, for a caller that runs several processes in it
  // one after the other. Null without cgroups. The caller owns it. Errors: "sandbox".
  virtual Result<std::unique_ptr<RunCgroup>> CreateCgroup(const std::string& run_id,
                                                          const CgroupLimits& limits) const = 0;

  // Runs `argv` (a host program, outside every namespace) in the run's `cgroup`; null: it
  // runs unconfined. Errors: "sandbox" when it cannot be started.
  virtual Result<HelperResult> RunHelper(const std::vector<std::string>& argv,
                                         RunCgroup* cgroup) const = 0;

  // Starts spec.argv in a new sandbox in `cgroup` (which the LiveSandbox then owns), without
  // waiting for it and without a wall-clock limit. Errors as Run's.
  virtual Result<std::unique_ptr<LiveSandbox>> Start(const SandboxSpec& spec,
                                                     std::unique_ptr<RunCgroup> cgroup) const = 0;
  // Like Start(spec, cgroup) in a cgroup of its own (CreateCgroup).
  Result<std::unique_ptr<LiveSandbox>> Start(const SandboxSpec& spec) const;

  // Starts spec.argv in a new sandbox in `cgroup` (CreateCgroup; null without cgroups; the
  // caller keeps it and removes it after the sandbox is gone) and leaves it waiting: its
  // stdin stays open and nothing is written to it, no limit of the run is watched yet (the
  // cgroup's and the rlimits are those of `spec`). Returns once the program has written
  // kWarmReadyByte on its stdout (its setup is done; up to 30 s). Errors as Run's, and when
  // it ends or stays silent before it is ready (the setup failure named).
  virtual Result<std::unique_ptr<WaitingSandbox>> StartWaiting(const SandboxSpec& spec,
                                                               RunCgroup* cgroup) const = 0;
  // Serves one run with `sandbox`: writes the memory and process limits of spec.limits to
  // its cgroup, sends `start_line` (ending in '\n') and then spec.stdin_data on its stdin, and
  // supervises it as Run does with spec.limits (wall-clock time from now; CPU time, OOM kills
  // and refused forks counted from now, so what the waiting program did before is not the
  // run's). Only limits, stdin and the start line come from `spec`: argv, mounts and the
  // rest are the sandbox's own. Errors (kSystem): the sandbox was used or has ended, or its
  // cgroup refused the limits (memory in use already above them).
  virtual Result<SandboxResult> RunWaiting(WaitingSandbox& sandbox, const std::string& start_line,
                                           const SandboxSpec& spec) const = 0;

  // The host's cgroups; null without them.
  virtual const CgroupManager* cgroups() const = 0;

  // The network namespaces made ahead for runs without network (net_namespace_pool.h); none
  // by default.
  virtual NetNamespaceStats net_namespace_stats() const { return {}; }
  // The zygote of `kind` (zygote.h); zeros without one.
  virtual ZygoteStats zygote_stats(ZygoteKind) const { return {}; }
};

}  // namespace sandrun::sandbox
