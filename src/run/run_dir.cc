#include "run/run_dir.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <vector>

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

// Emptied run directories kept for the next runs: a new directory on ext4 (the usual runs_dir)
// costs an inode allocation that scans past the recently deleted ones, ~0.3 ms each under a
// steady churn of runs (perf: find_inode_bit, recently_deleted), two per run, and their
// removal as much again; renaming a kept one costs a directory entry. A kept one holds only
// its empty "fs" (the tmpfs unmounted) and is named "spare-N" below the same parent, so a
// daemon's start and clean stop sweep what is left (storage/runs_dir.h SweepRunsDir).
class SpareDirs {
 public:
  // Renames a kept directory below `parent` to `path`; false when none is there.
  bool Take(const std::string& parent, const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = spares_.size(); i-- > 0;) {
      if (spares_[i].compare(0, parent.size() + 1, parent + "/") != 0) continue;
      const std::string spare = spares_[i];
      spares_.erase(spares_.begin() + static_cast<std::ptrdiff_t>(i));
      if (sys::Rename(spare, path).ok()) return true;
    }
    return false;
  }
  // Keeps `path` (its only entry an empty "fs") under a spare name; false when full (the
  // caller removes it).
  bool Keep(const std::string& path) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (spares_.size() >= kMax) return false;
    }
    if (!OnlyEmptyFs(path)) return false;
    const std::string spare = path.substr(0, path.rfind('/') + 1) + "spare-" +
                              std::to_string(::getpid()) + "-" + std::to_string(++counter_);
    if (!sys::Rename(path, spare).ok()) return false;
    std::lock_guard<std::mutex> lock(mu_);
    spares_.push_back(spare);
    return true;
  }

 private:
  static constexpr size_t kMax = 16;
  // Entries of `dir` but . and .., at most 2 counted.
  static int Entries(const std::string& dir, std::string* first) {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return -1;
    int n = 0;
    while (struct dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      if (n++ == 0 && first != nullptr) *first = name;
      if (n > 1) break;
    }
    ::closedir(d);
    return n;
  }
  static bool OnlyEmptyFs(const std::string& path) {
    std::string first;
    return Entries(path, &first) == 1 && first == "fs" && Entries(path + "/fs", nullptr) == 0;
  }
  std::mutex mu_;
  std::vector<std::string> spares_;
  std::atomic<uint64_t> counter_{0};
};

SpareDirs& Spares() {
  static SpareDirs spares;
  return spares;
}

}  // namespace

const RunTmpfs& KernelTmpfs() {
  static const Kernel kernel;
  return kernel;
}

RunDir::~RunDir() {
  const bool unmounted = mounted_ && tmpfs_.Unmount(path_ + "/fs").ok();
  if (unmounted && Spares().Keep(path_)) return;
  (void)sys::RemoveTree(path_);
}

Status RunDir::Create(uint64_t disk_bytes, uid_t uid, gid_t gid) {
  const RunPaths p = paths();
  Status s = Spares().Take(path_.substr(0, path_.rfind('/')), path_)
                 ? OkStatus()
                 : sys::MakeDirs(path_ + "/fs", 0755);
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
