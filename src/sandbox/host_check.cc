#include "sandbox/host_check.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

namespace sandrun::sandbox {
namespace {

long ReadLong(const std::string& path) {
  std::ifstream in(path);
  long value = -1;
  if (!(in >> value)) return -1;
  return value;
}

bool FileContains(const std::string& path, const std::string& needle) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str().find(needle) != std::string::npos;
}

}  // namespace

HostFacts ReadHostFacts(const std::string& proc) {
  HostFacts facts;
  facts.is_root = ::geteuid() == 0;
  facts.max_user_namespaces = ReadLong(proc + "/sys/user/max_user_namespaces");
  facts.unprivileged_userns_clone = ReadLong(proc + "/sys/kernel/unprivileged_userns_clone");
  facts.apparmor_restrict_userns =
      ReadLong(proc + "/sys/kernel/apparmor_restrict_unprivileged_userns");
  facts.seccomp = FileContains(proc + "/self/status", "Seccomp:");
  facts.tmpfs = FileContains(proc + "/filesystems", "tmpfs");
  return facts;
}

std::vector<HostProblem> CheckHost(const HostFacts& f, bool require_cgroups) {
  std::vector<HostProblem> problems;
  if (!f.is_root) {
    problems.push_back(
        {"sandrund is not running as root: it maps the sandbox's ids, mounts "
         "tmpfs workspaces and manages cgroups",
         "run it as root (systemd unit in systemd/, or sudo scripts/serve)", HostFacility::kRoot});
  }
  if (f.max_user_namespaces == 0) {
    problems.push_back({"user namespaces are disabled (user.max_user_namespaces = 0)",
                        "sysctl -w user.max_user_namespaces=15000 (and persist it in "
                        "/etc/sysctl.d/)",
                        HostFacility::kUserNamespaces});
  }
  // Both knobs restrict only processes without CAP_SYS_ADMIN; as root they do not apply.
  if (!f.is_root && f.unprivileged_userns_clone == 0) {
    problems.push_back({"Debian's kernel.unprivileged_userns_clone is 0",
                        "sysctl -w kernel.unprivileged_userns_clone=1, or run as root",
                        HostFacility::kUserNamespaces});
  }
  if (!f.is_root && f.apparmor_restrict_userns == 1) {
    problems.push_back({"AppArmor restricts unprivileged user namespaces (Ubuntu 23.10+)",
                        "run as root, or add an AppArmor profile allowing userns for sandrund",
                        HostFacility::kUserNamespaces});
  }
  if (!f.seccomp) {
    problems.push_back({"the kernel has no seccomp (no Seccomp: line in /proc/self/status)",
                        "use a kernel built with CONFIG_SECCOMP_FILTER=y", HostFacility::kSeccomp});
  }
  if (!f.tmpfs) {
    problems.push_back({"the kernel has no tmpfs", "use a kernel built with CONFIG_TMPFS=y",
                        HostFacility::kTmpfs});
  }
  if (f.cgroup_version.empty() && require_cgroups) {
    problems.push_back({"no usable cgroups: " + f.cgroup_error,
                        "give sandrund a delegated cgroup (systemd: Delegate=yes) or mount the "
                        "v1 memory and pids controllers; or set require_cgroups: false to run "
                        "with weaker limits",
                        HostFacility::kCgroups});
  }
  if (f.check_nginx) {
    if (f.nginx_version_output.empty()) {
      problems.push_back({"nginx is not installed", "apt-get install nginx", HostFacility::kNginx});
    } else if (f.nginx_version_output.find("http_secure_link_module") == std::string::npos) {
      problems.push_back({"nginx lacks the secure_link module (download links cannot be checked)",
                          "install Debian's nginx (built --with-http_secure_link_module)",
                          HostFacility::kNginx});
    }
  }
  return problems;
}

bool CgroupsUnavailable(const std::vector<HostProblem>& problems) {
  for (const auto& p : problems) {
    if (p.facility == HostFacility::kCgroups || p.facility == HostFacility::kRoot) return true;
  }
  return false;
}

std::vector<std::string> WeakerLimits(const HostFacts& f) {
  if (!f.cgroup_version.empty()) return {};
  return {"memory: RLIMIT_AS per process (address space, not resident memory; no OOM status)",
          "processes: RLIMIT_NPROC per host uid, shared by all runs",
          "CPU time: RLIMIT_CPU per process only, not the whole run",
          "usage figures: from rusage, not the cgroup"};
}

}  // namespace sandrun::sandbox
