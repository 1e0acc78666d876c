#include "sandbox/host.h"

#include <cstdio>
#include <utility>

#include "sandbox/cgroup.h"
#include "sandbox/host_check.h"
#include "sandbox/seccomp.h"
#include "sys/namespace_probe.h"
#include "sys/syscalls.h"

namespace sandrun::sandbox {
namespace {

// Output of `nginx -V` (it prints to stderr), "" when nginx is not installed.
std::string NginxVersionOutput() {
  FILE* pipe = ::popen("nginx -V 2>&1", "r");
  if (pipe == nullptr) return "";
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  return ::pclose(pipe) == 0 ? out : "";
}

// The root template at options.template_dir (a leftover there swept first), owned by the sandbox's
// root (launcher.cc WriteIdMaps: host id + 1); null and a line in `problems` when it fails.
std::unique_ptr<RootTemplate> BuildRootTemplate(const HostOptions& options, std::string& problems) {
  auto built =
      RootTemplate::Build(options.template_dir, options.sandbox_uid + 1, options.sandbox_gid + 1);
  if (built.ok()) return std::move(*built);
  problems += "root template: " + built.error().message + "\n";
  return nullptr;
}

// Without the socket cap a run's socket buffers exceed its memory_mb by the kernel's forced
// charges, tens of KiB per socket for as many sockets as it opens (DESIGN.md "Socket
// memory"): with require_cgroups the daemon does not start, else it says so as a weaker limit.
void NoteSocketCap(const CgroupManager* cgroups, const HostOptions& options, Host& host) {
  if (cgroups == nullptr || cgroups->socket_cap_error().empty()) return;
  const std::string error = cgroups->socket_cap_error();
  if (options.require_cgroups) {
    host.problems += "socket cap: " + error +
                     "\n  fix: a kernel with CONFIG_CGROUP_BPF and a cgroup2 hierarchy (on a v1 "
                     "host: mounted at /sys/fs/cgroup/unified), or require_cgroups: false to "
                     "run without the cap\n";
    return;
  }
  host.weaker_limits.push_back("socket buffers: no socket cap (" + error +
                               "); a run's socket memory can exceed memory_mb by tens of KiB "
                               "per socket");
  std::fprintf(stderr, "sandrund: WARNING: socket cap off: %s\n", error.c_str());
}

}  // namespace

Host PrepareHost(const HostOptions& options) {
  Host host;
  HostFacts facts = ReadHostFacts();
  facts.check_nginx = options.check_nginx;
  // The namespaces themselves, as the launcher makes them: a chroot or a container's policy
  // refuses them whatever the sysctls say.
  Status trial = sys::ProbeNamespaces(options.sandbox_uid, SandboxNamespaceFlags());
  if (!trial.ok()) {
    facts.userns_error = trial.error().message;
    facts.userns_errno = trial.error().err;
  }
  auto chroot = sys::InChroot();
  facts.in_chroot = chroot.ok() && *chroot;
  if (options.check_nginx) facts.nginx_version_output = NginxVersionOutput();
  auto filter = SeccompFilter::Compile();
  if (!filter.ok()) host.problems += "seccomp: " + filter.error().message + "\n";
  std::unique_ptr<CgroupManager> cgroups;
  auto detected = DetectCgroups(options.cgroup_name);
  if (detected.ok()) {
    cgroups = std::move(*detected);
    facts.cgroup_version = cgroups->version();
    int stale = cgroups->SweepStale();
    if (options.verbose) {
      std::fprintf(stderr, "sandrund: cgroup %s; swept %d stale run cgroups\n",
                   cgroups->version().c_str(), stale);
    }
  } else {
    facts.cgroup_error = detected.error().message;
  }
  const auto checked = CheckHost(facts, options.require_cgroups);
  host.cgroups_unavailable = CgroupsUnavailable(checked);
  for (const auto& problem : checked) {
    host.problems += problem.what + "\n  fix: " + problem.fix + "\n";
  }
  host.weaker_limits = WeakerLimits(facts);
  for (const auto& weaker : host.weaker_limits) {
    std::fprintf(stderr, "sandrund: WARNING: no cgroups (%s); weaker limit: %s\n",
                 facts.cgroup_error.c_str(), weaker.c_str());
  }
  NoteSocketCap(cgroups.get(), options, host);
  auto init = OpenInitExecutable();
  if (!init.ok()) host.problems += "sandrun-init: " + init.error().message + "\n";
  if (filter.ok() && init.ok() && host.problems.empty()) {
    host.root_template = BuildRootTemplate(options, host.problems);
  }
  if (host.root_template) {
    host.launcher = std::make_unique<Launcher>(std::move(*filter), std::move(cgroups),
                                               host.root_template->paths(), std::move(*init));
  }
  return host;
}

}  // namespace sandrun::sandbox
