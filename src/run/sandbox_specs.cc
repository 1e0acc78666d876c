#include "run/sandbox_specs.h"

#include <sys/types.h>

namespace sandrun::run {
namespace {

uint64_t Mib(int64_t mb) { return static_cast<uint64_t>(mb) << 20; }

}  // namespace

sandbox::SandboxLimits SandboxLimitsFor(const config::Config& config, const config::Limits& limits,
                                        SandboxUse use) {
  sandbox::SandboxLimits out;
  out.wall_time_ms = limits.wall_time_s * 1000;
  out.cpu_time_s = limits.cpu_time_s;
  out.cgroup.memory_bytes = Mib(limits.memory_mb);
  out.cgroup.processes = limits.processes;
  out.cgroup.freezable = use == SandboxUse::kKernel;  // frozen between cells (RunCgroup::Freeze)
  out.output_bytes = static_cast<uint64_t>(limits.output_bytes);
  out.file_size_bytes = Mib(limits.file_size_mb);
  out.disk_bytes = Mib(limits.disk_mb);
  switch (use) {
    case SandboxUse::kStep:
      break;
    case SandboxUse::kInstallStep:
      // A wheel (numpy's is 18 MB) and pip's unpacking in /tmp are bigger than a program's
      // files, and pip's CPU time is bounded by its wall time.
      out.wall_time_ms = config.install_wall_time_s * 1000;
      out.cpu_time_s = config.install_wall_time_s;
      out.file_size_bytes = Mib(config.install_disk_mb);
      out.disk_bytes = Mib(config.install_disk_mb);
      break;
    case SandboxUse::kWarm:
      // Nothing of the user's runs before the start line lowers them (sandrun_warm.py).
      out.cpu_time_s = config.ceilings.cpu_time_s;
      out.file_size_bytes = Mib(config.ceilings.file_size_mb);
      break;
    case SandboxUse::kKernel:
      // RLIMIT_CPU would count the kernel's whole life; each cell's CPU time is bounded from
      // the cgroup instead, and each cell's wall time and output by Kernel::Execute.
      out.cpu_time_s = int64_t{1} << 30;
      out.output_bytes = kKernelStartOutputBytes;
      break;
    case SandboxUse::kEnvironmentBuild:
      out.wall_time_ms = config.environment_build_wall_time_s * 1000;
      out.cpu_time_s = config.environment_build_wall_time_s;
      out.output_bytes = kEnvironmentBuildOutputBytes;
      out.file_size_bytes = Mib(config.install_disk_mb);
      out.disk_bytes = Mib(config.install_disk_mb);
      break;
  }
  return out;
}

sandbox::CgroupLimits CgroupLimitsFor(const config::Config& config, const config::Limits& limits,
                                      SandboxUse use) {
  return SandboxLimitsFor(config, limits, use).cgroup;
}

sandbox::SandboxSpec BaseSpec(const config::Config& config, const config::Limits& limits,
                              SandboxUse use, const std::string& run_id, bool network) {
  sandbox::SandboxSpec spec;
  spec.limits = SandboxLimitsFor(config, limits, use);
  spec.host_uid = static_cast<uid_t>(config.sandbox_uid);
  spec.host_gid = static_cast<gid_t>(config.sandbox_gid);
  spec.run_id = run_id;
  spec.network.enabled = network;
  spec.network.allow_cidrs = config.network_allow_cidrs;
  spec.network.uid = static_cast<uid_t>(config.network_uid);
  spec.network.gid = static_cast<gid_t>(config.network_uid);
  return spec;
}

}  // namespace sandrun::run
