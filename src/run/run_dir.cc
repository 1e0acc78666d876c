#include "run/run_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include "sys/syscalls.h"

namespace sandrun::run {
namespace {

class Kernel : public RunTmpfs {
 public:
  Status Mount(const std::string& dir, uint64_t bytes) const override {
    return sys::MountTmpfs(dir, bytes, 0, 0, 0755);
  }
  Status Unmount(const std::string& dir) const override { return sys::Unmount(dir); }
};

Status MakeOwnedDir(const std::string& path, int mode, uid_t uid, gid_t gid) {
  if (::mkdir(path.c_str(), 0700) != 0) return sys::ErrnoError("mkdir " + path);
  if (::chown(path.c_str(), uid, gid) != 0 || ::chmod(path.c_str(), mode) != 0) {
    return sys::ErrnoError("chown/chmod " + path);
  }
  return OkStatus();
}

}  // namespace

const RunTmpfs& KernelTmpfs() {
  static const Kernel kernel;
  return kernel;
}

RunDir::~RunDir() {
  if (mounted_) (void)tmpfs_.Unmount(path_ + "/fs");
  (void)sys::RemoveTree(path_);
}

Status RunDir::Create(uint64_t disk_bytes, uid_t uid, gid_t gid) {
  const RunPaths p = paths();
  Status s = sys::MakeDirs(path_ + "/fs", 0755);
  if (s.ok()) s = tmpfs_.Mount(path_ + "/fs", disk_bytes);
  mounted_ = s.ok();
  if (s.ok()) s = MakeOwnedDir(p.workspace, 0755, uid, gid);
  if (s.ok()) s = MakeOwnedDir(p.tmp, 01777, uid, gid);
  // The sandbox user's (not host root's, which shows as nobody:nogroup in `ls -la`); it
  // still cannot change it: it is bound read-only at both names of the workspace (mounts.cc).
  if (s.ok()) s = MakeOwnedDir(p.workspace + "/.sandrun", 0755, uid, gid);
  // Shown figures land here, on the run's tmpfs but outside the workspace.
  if (s.ok()) s = MakeOwnedDir(p.outputs, 0755, uid, gid);
  return s;
}

Status RunDir::Rename(const std::string& path) {
  if (Status s = sys::Rename(path_, path); !s.ok()) return s;
  path_ = path;
  return OkStatus();
}

}  // namespace sandrun::run
