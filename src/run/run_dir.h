// The directory and cgroup of one stateless run on the host (RunDir, RunTeardown), made by
// the run handler or, ahead of the run, by the warm pool (warm_pool.h); and the one step of
// making it that needs root, its tmpfs mount, behind a small interface (RunTmpfs) so the run
// handler's unit tests run without root.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "run/run_steps.h"
#include "sandbox/cgroup.h"
#include "util/result.h"

namespace sandrun::run {

// Mounts and unmounts the size-limited tmpfs of a run. Thread-safe.
class RunTmpfs {
 public:
  virtual ~RunTmpfs() = default;
  // A tmpfs of at most `bytes` at `dir` (an existing, empty directory), owned by root,
  // mode 0755. Errors name the mount.
  virtual Status Mount(const std::string& dir, uint64_t bytes) const = 0;
  virtual Status Unmount(const std::string& dir) const = 0;
};

// The real one: mount(2) and umount2(2) (sys/syscalls.h); needs root.
const RunTmpfs& KernelTmpfs();

// Directory of one run on the host: one size-limited tmpfs (so hard links to outside inodes
// fail with EXDEV and a disk-filling loop hits ENOSPC, not the host's disk) holding the
// workspace and the run's /tmp (the new root is the root template's). Removed whole by
// the destructor (the tmpfs unmounted first). Not thread-safe (one run owns it).
class RunDir {
 public:
  RunDir(std::string path, const RunTmpfs& tmpfs) : path_(std::move(path)), tmpfs_(tmpfs) {}
  ~RunDir();
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;

  // Makes the directories and mounts the tmpfs of `disk_bytes`; the workspace (with its
  // .sandrun), /tmp and the outputs area belong to `uid`:`gid`. Errors (code
  // "sandbox_error") name the call and path.
  Status Create(uint64_t disk_bytes, uid_t uid, gid_t gid);

  // Renames the directory to `path` (same parent; the tmpfs mounted below it moves along):
  // a warm pool's run directory takes the id of the run it serves. Errors name both paths.
  Status Rename(const std::string& path);

  RunPaths paths() const { return {path_ + "/fs/ws", path_ + "/fs/tmp", path_ + "/fs/out"}; }

 private:
  std::string path_;
  const RunTmpfs& tmpfs_;
  bool mounted_ = false;
};

// What a stateless run leaves to clean up, in the order it must go: the tmpfs charged to the
// cgroup first (members are destroyed in reverse order), then the cgroup.
struct RunTeardown {
  RunTeardown(std::unique_ptr<sandbox::RunCgroup> c, std::string dir_path, const RunTmpfs& tmpfs)
      : cgroup(std::move(c)), dir(std::move(dir_path), tmpfs) {}
  // The run's last init may still be exiting (RunCgroup::ReapLater): reaped before the
  // directory its mounts came from goes.
  ~RunTeardown() {
    if (cgroup) cgroup->ReapExiting();
  }
  RunTeardown(const RunTeardown&) = delete;
  RunTeardown& operator=(const RunTeardown&) = delete;
  std::unique_ptr<sandbox::RunCgroup> cgroup;  // null without cgroups
  RunDir dir;
};

}  // namespace sandrun::run
