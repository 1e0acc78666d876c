// The directory and cgroup of one run on the host (RunDir, RunTeardown), shared by the run
// handler and the warm pool, which makes them ahead of a run (warm_pool.h).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "sandbox/cgroup.h"
#include "util/result.h"

namespace sandrun::api {

// Directory of one run on the host: one size-limited tmpfs (so hard links to outside inodes
// fail with EXDEV and a disk-filling loop hits ENOSPC, not the host's disk) holding the
// workspace and the run's /tmp, and an empty directory for the new root. Removed whole.
class RunDir {
 public:
  explicit RunDir(std::string path) : path_(std::move(path)) {}
  ~RunDir();
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;
  // Makes the directories and mounts the tmpfs of `disk_bytes`; the workspace, /tmp,
  // .sandrun and outputs directories belong to the sandbox user (`uid`:`gid` on the host).
  // Errors ("sandbox_error") name the call and path. Not safe after fork.
  Status Create(uint64_t disk_bytes, uid_t uid, gid_t gid);
  // Renames the directory to `path` (same parent; the tmpfs mounted below it moves along):
  // a warm pool's run directory takes the id of the run it serves. Errors name both paths.
  Status Rename(const std::string& path);
  std::string workspace() const { return path_ + "/fs/ws"; }
  std::string outputs() const { return path_ + "/fs/out"; }
  std::string tmp() const { return path_ + "/fs/tmp"; }
  std::string root() const { return path_ + "/root"; }

 private:
  std::string path_;
  bool mounted_ = false;
};

// What a stateless run leaves to clean up, in the order it must go: the tmpfs charged to the
// cgroup first (members are destroyed in reverse order), then the cgroup.
struct RunTeardown {
  RunTeardown(std::unique_ptr<sandbox::RunCgroup> c, std::string dir_path)
      : cgroup(std::move(c)), dir(std::move(dir_path)) {}
  std::unique_ptr<sandbox::RunCgroup> cgroup;  // null without cgroups
  RunDir dir;
};

}  // namespace sandrun::api
