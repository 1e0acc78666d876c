// One user's directory in the artifact store and the operations on it that must not race
// (DESIGN.md §4). Layout of <artifacts_root>/<user-dir>/:
//   <run-id>/             a published run: its files, plus .sandrun/run, the run record
//   .staging-<run-id>/    a run being copied in; renamed to <run-id> once complete
//   .trash-<random>/      an evicted or expired run being deleted
// Names starting with '.' are the store's own; a run id never starts with one. Renaming a
// whole run in or out is what keeps nginx from ever serving half a run.
#pragma once

#include <string>
#include <vector>

#include "storage/fs.h"
#include "storage/quota.h"
#include "util/reserved_dirs.h"
#include "util/result.h"

namespace sandrun::storage {

inline constexpr char kStagingPrefix[] = ".staging-";
inline constexpr char kTrashPrefix[] = ".trash-";
// The run record lives at <run>/.sandrun/run. The export walk ignores ".sandrun/" in a
// workspace and Publish refuses it, so no generated file can take its place.
inline constexpr const char* kRecordDir = util::kRunRecordDir;
inline constexpr char kRecordFile[] = "run";

// Whether `name` can be a run id: one path segment (no '/' or NUL, not "." or ".."), 1 to
// 200 bytes (room for the staging prefix within NAME_MAX), not starting with '.'.
bool IsRunId(const std::string& name);

// <root>/<user-dir>, open and locked with flock(LOCK_EX): publishers of one user and the
// janitor take turns, whether they are threads of one daemon or separate processes. The lock
// is released by Unlock() or on destruction. Not safe after fork.
class UserDirLock {
 public:
  UserDirLock() = default;
  UserDirLock(UserDirLock&&) noexcept = default;
  UserDirLock& operator=(UserDirLock&&) noexcept = default;
  ~UserDirLock() { Unlock(); }

  // Opens `name` in `root_fd` (creating it first when `create`), without following a
  // symlink, and locks it. The janitor removes an empty user directory while holding its
  // lock, so a directory found unlinked after the wait is opened (or made) afresh. With
  // !create and no such directory, returns a lock that is !valid(). `path` is for messages.
  // Errors: mkdirat, openat or flock fail.
  static Result<UserDirLock> Acquire(int root_fd, const std::string& name, bool create,
                                     const std::string& path);

  bool valid() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }

  // Releases the lock and keeps the directory open. A caller that unlocks must keep
  // something of its own in the directory (a staging dir) so the janitor cannot remove it.
  void Unlock();
  // Takes the lock again after Unlock(). Errors: flock fails.
  Status Relock();

 private:
  UniqueFd fd_;
  std::string path_;
  bool locked_ = false;
};

// The published runs in the user directory `user_fd` (whose lock the caller holds): every
// directory whose name is a run id. Each RunInfo comes from the run's record; a run without
// a readable record (made by an older version, or damaged) is measured by walking it, with
// its directory's mtime as created_at, so that it still counts and still expires.
// Errors: the directory cannot be listed.
Result<std::vector<RunInfo>> ScanRuns(int user_fd, const std::string& path);

// Writes the run record of `run` into the run directory `run_fd` (.sandrun/run, through a
// temporary name). Errors: a write fails (disk full, ...).
Status WriteRunRecord(int run_fd, const RunInfo& run, const std::string& path);

// Renames `name` in `user_fd` to a fresh .trash-<random> name, so nginx stops serving all
// of it at once; returns the new name. Delete it with RemoveTreeAt, ideally after unlocking.
// Errors: renameat fails (ENOENT when already gone).
Result<std::string> MoveToTrash(int user_fd, const std::string& name, const std::string& path);

// A random name with `prefix`: prefix + 16 hex digits. Errors: the CSPRNG fails.
Result<std::string> RandomName(const std::string& prefix);

}  // namespace sandrun::storage
