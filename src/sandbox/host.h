// The host's preparation at start (and for `sandrund check`): the checks of host_check.h on
// the facts read from this host, then the pieces a launcher needs — the seccomp filter, the
// cgroups (stale run cgroups swept), sandrun-init and the root template.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "sandbox/launcher.h"
#include "sandbox/root_template.h"

namespace sandrun::sandbox {

struct HostOptions {
  uid_t sandbox_uid = 64000;  // the host ids the sandbox user maps to (config sandbox_uid/gid)
  gid_t sandbox_gid = 64000;
  std::string cgroup_name;      // config cgroup_name
  bool require_cgroups = true;  // config require_cgroups
  std::string template_dir;     // where the root template is built (a leftover swept first)
  bool verbose = false;         // log the cgroup version and the sweep
  bool check_nginx = false;     // only `sandrund check` looks at nginx (the daemon runs none)
};

struct Host {
  std::unique_ptr<RootTemplate> root_template;  // outlives the launcher's sandboxes
  std::unique_ptr<Launcher> launcher;           // null when the host cannot sandbox
  std::string problems;                         // "" when the host can sandbox
  std::vector<std::string> weaker_limits;       // without cgroups (require_cgroups: false)
  bool cgroups_unavailable = false;             // CgroupsUnavailable of the problems
};

// Checks this host and prepares a launcher (Host::launcher) when it can sandbox; else
// Host::problems says each problem and its fix, one per line. Logs the weaker limits of a
// host without cgroups to stderr. Not safe after fork.
Host PrepareHost(const HostOptions& options);

}  // namespace sandrun::sandbox
