// The one conversion of a run's limits (config::Limits: the config's defaults, a request's
// limits, the ceilings) into what bounds a sandbox: its SandboxLimits (rlimits, tmpfs sizes,
// wall and output budget) and its cgroup's CgroupLimits. Every sandbox the daemon starts (a
// stateless step, an install step, a warm pool's sandbox, a kernel, an environment build; the
// self-test is a stateless step) takes its limits from here, so a new limit is converted in
// one place. Knows nothing of HTTP or JSON. Pure.
#pragma once

#include <string>

#include "config/config.h"
#include "sandbox/cgroup.h"
#include "sandbox/runner.h"
#include "sandbox/spec.h"

namespace sandrun::run {

// What a sandbox is for: which of the limits bound it, and from where.
enum class SandboxUse {
  // A step of a stateless run (the self-test is one): every limit is the request's.
  kStep,
  // A step that only installs packages: the install budget (install_wall_time_s,
  // install_disk_mb) replaces the program's CPU time, file size and disk.
  kInstallStep,
  // A warm pool's sandbox: its rlimits (CPU time, file size) at the ceilings until the start
  // line lowers them to the run's; the rest as a step's.
  kWarm,
  // A stateful run's kernel: memory, processes, file size and disk bound it for its whole
  // life; CPU time and output are per cell (kernel::ExecuteLimits), so effectively unbounded
  // here; the cgroup is freezable (frozen between cells).
  kKernel,
  // pip building a prepared environment: the limits given (the ceilings) for memory and
  // processes, environment_build_wall_time_s, 1 MiB of output, install_disk_mb.
  kEnvironmentBuild,
};

// The output a kernel's sandbox keeps before it answers (its start-up error), and what an
// environment build's pip may print.
inline constexpr uint64_t kKernelStartOutputBytes = 64 << 10;
inline constexpr uint64_t kEnvironmentBuildOutputBytes = 1 << 20;

// The sandbox limits of a `use` sandbox for a run with `limits`. For kStep and kInstallStep
// the wall time and output are the whole run's; a step of several takes what is left of them
// (run_steps.h StepBudget) and sets those two itself.
sandbox::SandboxLimits SandboxLimitsFor(const config::Config& config, const config::Limits& limits,
                                        SandboxUse use);

// The cgroup limits of that sandbox (memory without swap, pids.max; freezable for a kernel):
// SandboxLimitsFor(...).cgroup, the same numbers for every use.
sandbox::CgroupLimits CgroupLimitsFor(const config::Config& config, const config::Limits& limits,
                                      SandboxUse use);

// A SandboxSpec with everything that does not depend on what it runs: SandboxLimitsFor, the
// host uid/gid (config sandbox_uid/gid), the run id and the outbound network (`network` on or
// off, config network_allow_cidrs). The caller adds argv, env and directories.
sandbox::SandboxSpec BaseSpec(const config::Config& config, const config::Limits& limits,
                              SandboxUse use, const std::string& run_id, bool network);

}  // namespace sandrun::run
