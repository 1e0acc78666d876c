// Persistent per-chat workspaces (DESIGN.md §6). A session's files live on disk under
// <root>/<user-dir>/<session-dir>/files; a run copies them into its fresh size-limited tmpfs
// workspace (Restore) and copies the workspace back when it ends (Save). The run itself never
// touches the disk copy, so the workspace keeps every property of a fresh one (size limit,
// EXDEV for hard links, no symlink followed on the way back).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <string>

#include "storage/quota.h"
#include "sys/unique_fd.h"
#include "util/result.h"

namespace sandrun::storage {

// Held while a run uses the session: runs of one session are serialised (flock(2)).
class SessionLock {
 public:
  SessionLock() = default;
  SessionLock(sys::UniqueFd fd, std::string dir, bool created)
      : fd_(std::move(fd)), dir_(std::move(dir)), created_(created) {}
  const std::string& dir() const { return dir_; }  // <root>/<user-dir>/<session-dir>
  bool held() const { return fd_.valid(); }
  // This Lock made the session: this store had no trace of it (never used here, or
  // deleted as idle since).
  bool created() const { return created_; }

 private:
  sys::UniqueFd fd_;  // the lock file; closing it releases the lock
  std::string dir_;
  bool created_ = false;
};

// path (workspace-relative) -> sha256 hex, of the files a run started with.
using FileDigests = std::map<std::string, std::string>;

// What one copy of a tree may create. Entries are files, hard links and directories (each
// costs the host a directory entry, and files and directories an inode); bytes are the
// BytesOnDisk (file_copy.h) of the files, each multiply-linked inode counted once.
struct TreeBudget {
  static constexpr uint64_t kUnbounded = std::numeric_limits<uint64_t>::max();
  uint64_t max_entries = kUnbounded;
  uint64_t max_bytes = kUnbounded;
};

// The budget left by `quota` (0 in a field = unbounded) once `used` is taken from it.
TreeBudget BudgetLeft(const Quota& quota, const Usage& used);

class SessionStore {
 public:
  // `root`: <state>/sessions. `key`: keys the user and session directory names (HMAC), so
  // neither id appears on disk and one user cannot name another's session.
  SessionStore(std::string root, std::string key) : root_(std::move(root)), key_(std::move(key)) {}

  // Locks (user, session), creating it if new (SessionLock::created); waits at most `wait`. A
  // session whose Save crashed between its two renames (`files` gone, `files.old` there) gets
  // `files.old` back. Errors: kBusy when another run holds it past the wait;
  // kSystem on I/O failure.
  Result<SessionLock> Lock(const std::string& user, const std::string& session,
                           std::chrono::milliseconds wait) const;

  // Copies the session's files into `workspace`, owned by uid:gid, keeping holes and hard
  // links. Errors: kFileLimit when they do not fit (the workspace's size limit),
  // kSystem otherwise.
  Result<FileDigests> Restore(const SessionLock& lock, const std::string& workspace, uid_t uid,
                              gid_t gid) const;

  // Whether the session holds any file or directory (a Restore would copy something).
  bool HasFiles(const SessionLock& lock) const;

  // Replaces the session's files with the workspace's regular files and directories (no
  // symlinks, FIFOs, sockets or devices; not ".sandrun/"), keeping holes and hard links.
  // The user's sessions together must fit `quota` (files = entries, bytes on disk; 0 in a
  // field = unbounded): the copy stops as soon as this one would not, and the previous copy
  // stays. Atomic: a crash leaves the old or the new copy (Lock restores the old one).
  // Errors: kOverBudget (the message says which bound) and nothing changed;
  // kFileLimit when the host disk is full; kSystem otherwise.
  Status Save(const SessionLock& lock, const std::string& workspace, const Quota& quota = {}) const;

  // What all sessions of `user` hold (as recorded by Save; measured for sessions saved
  // before records existed). Counted against the user's quota by the artifact store.
  Usage UserUsage(const std::string& user) const;

  // Deletes sessions unused for `idle_s` seconds (not those locked now). Returns how many.
  int SweepIdle(int64_t idle_s) const;

 private:
  std::string UserPath(const std::string& user) const;

  std::string root_;
  std::string key_;
};

struct CopyTreeOptions {
  std::string skip_top;                // a top-level entry to leave out (e.g. ".sandrun")
  uid_t uid = static_cast<uid_t>(-1);  // owner of what is created; -1 keeps the caller's
  gid_t gid = static_cast<gid_t>(-1);
  FileDigests* digests = nullptr;  // filled (path -> sha256) when non-null
  TreeBudget budget;
};

// Copies the tree below `from` into the existing directory `to` without following symlinks
// anywhere (openat + O_NOFOLLOW); only regular files and directories, each file through
// CopyFileKeepingHoles (holes stay holes); a file with several links inside the tree is
// copied once and linked (linkat) at its other names. Returns what it created.
// The walk is sys::WalkTree's: a copy that stops, at a limit or at a directory it cannot
// read, is an error, never a shorter success. Entries it does not copy (symlinks, ...) count
// against the budget's entries too, as the walk reads no more names than the budget.
// Errors: kOverBudget when the tree has more entries or bytes than `budget`, more than
// 100000 entries, or is deeper than 64 directories (what was copied stays: the caller
// discards it); kFileLimit on ENOSPC/EDQUOT/EFBIG; kSystem otherwise (a directory that
// cannot be read included). Messages name the path. Not safe after fork.
Result<Usage> CopyTree(const std::string& from, const std::string& to,
                       const CopyTreeOptions& options);

}  // namespace sandrun::storage
