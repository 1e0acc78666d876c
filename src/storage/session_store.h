// Persistent per-chat workspaces (DESIGN.md §6). A session's files live on disk under
// <root>/<user-dir>/<session-dir>/files; a run copies them into its fresh size-limited tmpfs
// workspace (Restore) and copies the workspace back when it ends (Save). The run itself never
// touches the disk copy, so the workspace keeps every property of a fresh one (size limit,
// EXDEV for hard links, no symlink followed on the way back).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "sys/unique_fd.h"
#include "util/result.h"

namespace sandrun::storage {

// Held while a run uses the session: runs of one session are serialised (flock(2)).
class SessionLock {
 public:
  SessionLock() = default;
  SessionLock(sys::UniqueFd fd, std::string dir) : fd_(std::move(fd)), dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }  // <root>/<user-dir>/<session-dir>
  bool held() const { return fd_.valid(); }

 private:
  sys::UniqueFd fd_;  // the lock file; closing it releases the lock
  std::string dir_;
};

// path (workspace-relative) -> sha256 hex, of the files a run started with.
using FileDigests = std::map<std::string, std::string>;

class SessionStore {
 public:
  // `root`: <state>/sessions. `key`: keys the user and session directory names (HMAC), so
  // neither id appears on disk and one user cannot name another's session.
  SessionStore(std::string root, std::string key) : root_(std::move(root)), key_(std::move(key)) {}

  // Locks (user, session), creating it if new; waits at most `wait`. Errors: code
  // "session_busy" when another run holds it past the wait; "storage" on I/O failure.
  Result<SessionLock> Lock(const std::string& user, const std::string& session,
                           std::chrono::milliseconds wait) const;

  // Copies the session's files into `workspace`, owned by uid:gid. Errors: code "file_limit"
  // when they do not fit (the workspace's size limit), "storage" otherwise.
  Result<FileDigests> Restore(const SessionLock& lock, const std::string& workspace, uid_t uid,
                              gid_t gid) const;

  // Replaces the session's files with the workspace's regular files and directories (no
  // symlinks, FIFOs, sockets or devices; not ".sandrun/"). Atomic: a crash leaves the old
  // or the new copy.
  Status Save(const SessionLock& lock, const std::string& workspace) const;

  // Deletes sessions unused for `idle_s` seconds (not those locked now). Returns how many.
  int SweepIdle(int64_t idle_s) const;

 private:
  std::string root_;
  std::string key_;
};

// Copies the tree below `from` into the existing directory `to` without following symlinks
// anywhere (openat + O_NOFOLLOW); only regular files and directories; `skip_top` names a
// top-level entry to leave out (e.g. ".sandrun"); files and dirs made owned by uid:gid
// (pass -1 to keep the caller's). Fills `digests` (path -> sha256) when non-null. Bounded:
// depth 64, 100000 entries. Errors name the path; ENOSPC/EDQUOT give code "file_limit".
Status CopyTree(const std::string& from, const std::string& to, const std::string& skip_top,
                uid_t uid, gid_t gid, FileDigests* digests);

}  // namespace sandrun::storage
