// Host checks: can this machine build sandboxes? Used by `sandrund check` and /healthz.
// Reading the host (ReadHostFacts) is kept apart from judging it (CheckHost), so tests can
// fake every answer the checks read.
#pragma once

#include <string>
#include <vector>

namespace sandrun::sandbox {

// What the checks read. -1 / "" = absent on this host.
struct HostFacts {
  bool is_root = false;
  long max_user_namespaces = -1;        // /proc/sys/user/max_user_namespaces
  long unprivileged_userns_clone = -1;  // Debian: /proc/sys/kernel/unprivileged_userns_clone
  long apparmor_restrict_userns = -1;   // Ubuntu: .../kernel/apparmor_restrict_unprivileged_userns
  bool seccomp = false;                 // "Seccomp:" in /proc/self/status
  bool tmpfs = false;                   // "tmpfs" in /proc/filesystems
  std::string cgroup_version;           // "v2", "v1" or "" (from DetectCgroups)
  std::string cgroup_error;             // why no usable cgroups
  std::string nginx_version_output;     // `nginx -V` (stderr); "" when nginx is absent
  bool check_nginx = true;              // the daemon's own /healthz skips nginx
  bool in_chroot = false;               // sys::InChroot, filled by the caller
  bool cap_sys_admin = true;            // CAP_SYS_ADMIN in CapEff of <proc>/self/status
  std::string container;                // pid 1's container= (podman, lxc, ...), "docker"
                                        // for /.dockerenv; "" when none is seen
  // A trial of the sandbox's namespaces (sys::ProbeNamespaces, filled by the caller): "" =
  // made or not tried; else the refusal's message, with its errno in userns_errno.
  std::string userns_error;
  int userns_errno = 0;
};

// The facility a host problem takes away.
enum class HostFacility {
  kRoot,            // root's privileges (needed to map ids, mount and manage cgroups)
  kUserNamespaces,  // user namespaces
  kSeccomp,
  kTmpfs,
  kCgroups,  // a usable cgroup hierarchy (only a problem with require_cgroups)
  kNginx,    // nginx with the secure_link module (`sandrund check` only)
};

struct HostProblem {
  std::string what;  // one line: what is wrong
  std::string fix;   // one line: how to fix it
  HostFacility facility;
};

// Reads the facts from `proc` (normally "/proc") and the container marker files below `root`
// ("/"); cgroup, nginx, chroot and namespace-trial facts are filled by the caller. Not safe after
// fork.
HostFacts ReadHostFacts(const std::string& proc = "/proc", const std::string& root = "/");

// The namespaces the launcher makes for each sandbox (its clone flags), for the trial.
unsigned long SandboxNamespaceFlags();

// Judges the facts; empty = this host can sandbox. `require_cgroups` makes missing cgroups a
// problem rather than a weaker-limits note (see WeakerLimits).
std::vector<HostProblem> CheckHost(const HostFacts& facts, bool require_cgroups);

// True when `problems` leave the daemon without cgroups it can manage: no usable hierarchy,
// or not root (only root manages them). The daemon refuses to start then under
// require_cgroups.
bool CgroupsUnavailable(const std::vector<HostProblem>& problems);

// The limits that are weaker than designed on this host (without cgroups), one line each.
std::vector<std::string> WeakerLimits(const HostFacts& facts);

}  // namespace sandrun::sandbox
