#include "sandbox/root_template.h"

#include "sandbox/child.h"
#include "sandbox/network_rules.h"
#include "sys/syscalls.h"

namespace sandrun::sandbox {
namespace {

// Runs the template's plan on the host. Its first step mounts the template's tmpfs, which
// `mount` owns from then on: a failed step leaves nothing mounted. Entries the plan creates,
// and the root directories of its tmpfs mounts (root's by their mode= option), get the
// sandbox root's owner (lchown: a symlink's own owner).
Status RunTemplatePlan(const MountPlan& plan, uid_t uid, gid_t gid, sys::MountPoint& mount) {
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const MountStep& step = plan.steps[i];
    if (!RunMountStep(step)) return sys::ErrnoError("root template: " + plan.descriptions[i]);
    if (i == 0) mount = sys::MountPoint(step.target);
    const bool made = step.op == MountOp::kTmpfs || step.op == MountOp::kMkdir ||
                      step.op == MountOp::kFile || step.op == MountOp::kSymlink;
    if (made) {
      if (Status s = sys::Lchown(step.target, uid, gid); !s.ok()) return s;
    }
  }
  return OkStatus();
}

}  // namespace

RootTemplate::RootTemplate(std::string dir)
    : dir_(std::move(dir)), paths_{dir_ + "/root", dir_ + "/resolv.conf"} {}

RootTemplate::~RootTemplate() {
  mount_.Reset();
  (void)Remove(dir_);
}

int RootTemplate::Remove(const std::string& dir) {
  const int detached = sys::UnmountAll(dir + "/root");
  (void)sys::RemoveTree(dir);
  return detached;
}

Result<std::unique_ptr<RootTemplate>> RootTemplate::Build(const std::string& dir, uid_t owner_uid,
                                                          gid_t owner_gid) {
  (void)Remove(dir);
  std::unique_ptr<RootTemplate> t(new RootTemplate(dir));
  if (Status s = sys::MakeDirs(t->paths_.root, 0755); !s.ok()) return s.error();
  const std::string resolv = std::string("nameserver ") + kSlirpDns + "\n";
  if (Status s = sys::WriteFile(t->paths_.resolv_conf, resolv, 0644); !s.ok()) return s.error();
  const MountPlan plan = BuildTemplatePlan(t->paths_.root, kRootTemplateName);
  if (Status s = RunTemplatePlan(plan, owner_uid, owner_gid, t->mount_); !s.ok()) {
    return s.error();
  }
  return t;
}

}  // namespace sandrun::sandbox
