#include "sandbox/runner.h"

#include "util/phases.h"

namespace sandrun::sandbox {

Result<SandboxResult> SandboxRunner::Run(const SandboxSpec& spec) const {
  auto cgroup = CreateCgroup(spec.run_id, spec.limits.cgroup);
  if (!cgroup.ok()) return cgroup.error();
  auto result = Run(spec, cgroup->get());
  if (*cgroup) {
    (void)(*cgroup)->Destroy();
    util::StampPhase("cgroup_removed");
  }
  return result;
}

Result<std::unique_ptr<LiveSandbox>> SandboxRunner::Start(const SandboxSpec& spec) const {
  auto cgroup = CreateCgroup(spec.run_id, spec.limits.cgroup);
  if (!cgroup.ok()) return cgroup.error();
  return Start(spec, std::move(*cgroup));
}

}  // namespace sandrun::sandbox
