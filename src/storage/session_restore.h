// Session restore in a helper process. The session's files are copied into
// the run's tmpfs workspace by a short-lived `sandrund restore-session` process that the
// launcher first moves into the run's own cgroup (Launcher::RunHelper), where the run's
// steps then run too, so the tmpfs pages are charged to the run, not to the daemon, for the
// whole run: a session larger than memory_mb (or disk_mb) is refused, and a smaller one
// leaves the program only the rest of memory_mb.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "storage/session_store.h"
#include "util/result.h"

namespace sandrun::storage {

// The helper's exit codes.
constexpr int kRestoreOk = 0;
constexpr int kRestoreFailed = 1;     // message on stderr
constexpr int kRestoreFileLimit = 3;  // the workspace's size limit (disk_mb); message on stderr
constexpr int kRestoreBadUsage = 2;

// The helper's argv after the subcommand: session dir (SessionLock::dir()), workspace,
// uid, gid. The caller holds the session's lock meanwhile.
std::vector<std::string> RestoreHelperArgs(const std::string& session_dir,
                                           const std::string& workspace, uid_t uid, gid_t gid);

// `sandrund restore-session ARGS...`: waits for one byte on fd 3 (the launcher has moved it
// into the run's cgroup by then), copies the session's files with SessionStore::Restore and
// writes their digests to stdout (EncodeDigests). Returns the exit code.
int RestoreSessionMain(const std::vector<std::string>& args);

// "<sha256 hex>\0<path>\0" per file: paths may hold any byte but NUL. Pure.
std::string EncodeDigests(const FileDigests& digests);
// Errors: kSystem when `bytes` is not such a list.
Result<FileDigests> DecodeDigests(std::string_view bytes);

}  // namespace sandrun::storage
