// Parent side of the mount namespace: builds the ordered list of MountSteps the child runs
// to make the new root (DESIGN.md §3 "File system").
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "sandbox/child.h"
#include "sandbox/spec.h"

namespace sandrun::sandbox {

// Owns the strings the steps point to.
struct MountPlan {
  std::deque<std::string> strings;  // deque: stable addresses while growing
  std::vector<MountStep> steps;
  std::vector<std::string> descriptions;  // one per step, for error messages
};

// Host paths bound read-only into the sandbox (when present on the host); symlinks (merged
// /usr: /bin -> usr/bin) are recreated as symlinks.
const std::vector<std::string>& SystemBinds();
// /etc entries interpreters need (DESIGN.md §3), bound read-only when present.
const std::vector<std::string>& EtcEntries();

// Builds the plan for `spec`. Reads the host (lstat, readlink, statvfs) to choose between
// bind, symlink and skip, and to keep the source mount's locked flags on remount (a user
// namespace may not clear nosuid/nodev/noexec/atime flags: mount(2) EPERM). Not child-safe.
MountPlan BuildMountPlan(const SandboxSpec& spec);

}  // namespace sandrun::sandbox
