// Launcher: the parent side of one sandboxed run. Thread-safe: one Launcher serves all
// worker threads; each Run() call builds and destroys its own sandbox.
#pragma once

#include <memory>
#include <string>

#include "sandbox/cgroup.h"
#include "sandbox/result.h"
#include "sandbox/seccomp.h"
#include "sandbox/spec.h"
#include "util/result.h"

namespace sandrun::sandbox {

class Launcher {
 public:
  // `cgroups` may be null (require_cgroups = false): memory is then capped by RLIMIT_AS and
  // processes by RLIMIT_NPROC, which are weaker (per process / per uid across runs).
  Launcher(SeccompFilter filter, std::unique_ptr<CgroupManager> cgroups);

  // Runs spec.argv in a new sandbox and waits for it (at most the wall-time limit plus
  // a short grace period). The program's fate is data in SandboxResult; an Error (code
  // "sandbox") means the sandbox could not be built, and its message names the failed step
  // and errno. Not safe after fork.
  Result<SandboxResult> Run(const SandboxSpec& spec) const;

  const CgroupManager* cgroups() const { return cgroups_.get(); }

 private:
  SeccompFilter filter_;
  std::unique_ptr<CgroupManager> cgroups_;
};

}  // namespace sandrun::sandbox
