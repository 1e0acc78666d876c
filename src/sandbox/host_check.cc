#include "sandbox/host_check.h"

#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool FileContains(const std::string& path, const std::string& needle) {
  return ReadText(path).find(needle) != std::string::npos;
}

// CAP_SYS_ADMIN (bit 21) in the "CapEff:" line of a status file; true when there is none.
bool HasCapSysAdmin(const std::string& status) {
  const size_t at = status.find("CapEff:");
  if (at == std::string::npos) return true;
  unsigned long long caps = 0;
  std::istringstream(status.substr(at + 7)) >> std::hex >> caps;
  return (caps >> 21) & 1U;
}

// pid 1's container= (NUL-separated environ), or what marker files below `root` say.
std::string ContainerName(const std::string& proc, const std::string& root) {
  const std::string environ = ReadText(proc + "/1/environ");
  for (size_t at = 0; at < environ.size();) {
    const size_t end = std::min(environ.find('\0', at), environ.size());
    const std::string entry = environ.substr(at, end - at);
    if (entry.rfind("container=", 0) == 0 && entry.size() > 10) return entry.substr(10);
    at = end + 1;
  }
  struct stat st {};
  if (::stat((root + "/.dockerenv").c_str(), &st) == 0) return "docker";
  if (::stat((root + "/run/.containerenv").c_str(), &st) == 0) return "podman";
  return "";
}

constexpr char kContainerFix[] =
    "run sandrun on the host or in a VM, or give its container every capability "
    "(docker run --privileged) and a cgroup it may manage";

// Why the trial of the sandbox's namespaces failed, as far as the facts tell, and its fix.
HostProblem NamespaceTrialProblem(const HostFacts& f) {
  HostProblem p{"the kernel refused the sandbox's namespaces: " + f.userns_error, "",
                HostFacility::kUserNamespaces};
  const std::string in_container =
      f.container.empty() ? "" : " (in a " + f.container + " container)";
  if (f.userns_errno == ENOSPC) {
    p.what += " (the user namespace limit is reached)";
    p.fix = "sysctl -w user.max_user_namespaces=15000 (and persist it in /etc/sysctl.d/)";
  } else if (f.in_chroot) {
    p.what += " (sandrund runs in a chroot: the kernel makes no user namespace there)";
    p.fix = "run sandrun outside the chroot: on the machine itself or in a VM";
  } else if (!f.cap_sys_admin) {
    p.what += " (sandrund lacks CAP_SYS_ADMIN" + in_container + ")";
    p.fix = kContainerFix;
  } else if (f.unprivileged_userns_clone == 0) {
    p.what +=
        " (Debian's kernel.unprivileged_userns_clone is 0; sandrund makes them as the "
        "unprivileged sandbox uid)";
    p.fix = "sysctl -w kernel.unprivileged_userns_clone=1 (and persist it in /etc/sysctl.d/)";
  } else if (f.apparmor_restrict_userns == 1) {
    p.what += " (AppArmor restricts unprivileged user namespaces)";
    p.fix =
        "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile "
        "allowing userns for sandrund";
  } else if (!f.container.empty()) {
    p.what += in_container;
    p.fix =
        "the container's seccomp or AppArmor policy refuses namespaces: run sandrun on the "
        "host or in a VM, or start the container with --privileged";
  } else {
    p.fix =
        "check the sysctls user.max_user_namespaces and kernel.unprivileged_userns_clone, "
        "and any seccomp, AppArmor or SELinux policy over sandrund (a container's or a "
        "service manager's); sandrund must run on the host or in a VM, not in a chroot";
  }
  return p;
}

}  // namespace

unsigned long SandboxNamespaceFlags() {
  return CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET;
}

HostFacts ReadHostFacts(const std::string& proc, const std::string& root) {
  HostFacts facts;
  facts.is_root = ::geteuid() == 0;
  facts.max_user_namespaces = ReadLong(proc + "/sys/user/max_user_namespaces");
  facts.unprivileged_userns_clone = ReadLong(proc + "/sys/kernel/unprivileged_userns_clone");
  facts.apparmor_restrict_userns =
      ReadLong(proc + "/sys/kernel/apparmor_restrict_unprivileged_userns");
  facts.seccomp = FileContains(proc + "/self/status", "Seccomp:");
  facts.tmpfs = FileContains(proc + "/filesystems", "tmpfs");
  facts.cap_sys_admin = HasCapSysAdmin(ReadText(proc + "/self/status"));
  facts.container = ContainerName(proc, root);
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
  // Root in a container without the capability (Docker's default): no mount, no cgroup, and
  // Docker's seccomp profile refuses namespaces too.
  const bool root_without_admin = f.is_root && !f.cap_sys_admin;
  if (root_without_admin) {
    problems.push_back(
        {"sandrund runs as root without CAP_SYS_ADMIN" +
             (f.container.empty() ? std::string() : " (in a " + f.container + " container)") +
             ": it cannot mount the sandboxes' filesystems, make their namespaces or manage "
             "cgroups",
         kContainerFix, HostFacility::kUserNamespaces});
  }
  // A refused trial says more than the sysctls: a chroot, a policy. Named once: a disabled
  // sysctl or the missing capability above already explains it.
  if (!f.userns_error.empty() && f.max_user_namespaces != 0 && !root_without_admin) {
    problems.push_back(NamespaceTrialProblem(f));
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
