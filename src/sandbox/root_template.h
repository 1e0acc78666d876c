// The root template: the part of every sandbox's root that is the same for
// every run, built once by the daemon on the host, in its own (the host's) mount namespace:
// a read-only tmpfs with the read-only binds of the host's /usr, /etc entries and devices
// (mounts.h BuildTemplatePlan). Each sandbox's child finds it in the copy of that namespace
// that clone(CLONE_NEWNS) gives it, mounts only its run's own parts on the template's mount
// points (BuildMountPlan) and pivots into it: a dozen mount calls per run instead of ~66,
// and as few for the kernel to take down at its exit.
//
// On the host, in a directory `dir` (searchable by the sandbox's ids, like the runs
// directory it lives in): `dir`/root, the template's mount point, and `dir`/resolv.conf, the
// network's /etc/resolv.conf, outside the template.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "sandbox/mounts.h"
#include "sys/mount_point.h"
#include "util/result.h"

namespace sandrun::sandbox {

// Name of the template's tmpfs in /proc/self/mountinfo (its "mount source"): how a stop
// script finds one that a killed daemon left.
inline constexpr char kRootTemplateName[] = "sandrun-root-template";

class RootTemplate {
 public:
  // Removes what an earlier daemon left at `dir` (Remove), then builds the template there.
  // The files and directories the template makes belong to `owner_uid`:`owner_gid`, the
  // host ids of the sandbox's root (so they show as root's inside, as the host's do not).
  // Errors (kSystem) name the failed step and path; nothing is left behind then. Needs root.
  // Not safe after fork.
  static Result<std::unique_ptr<RootTemplate>> Build(const std::string& dir, uid_t owner_uid,
                                                     gid_t owner_gid);

  // Detaches whatever is mounted on `dir`/root (the whole template, at once: umount2(2)
  // MNT_DETACH; sandboxes using it keep their copies) and removes `dir`. Returns how many
  // mounts went. A missing `dir` is 0. Not safe after fork.
  static int Remove(const std::string& dir);

  ~RootTemplate();  // Remove(dir)
  RootTemplate(const RootTemplate&) = delete;
  RootTemplate& operator=(const RootTemplate&) = delete;

  const RootTemplatePaths& paths() const { return paths_; }

 private:
  explicit RootTemplate(std::string dir);

  std::string dir_;
  RootTemplatePaths paths_;
  sys::MountPoint mount_;
};

}  // namespace sandrun::sandbox
