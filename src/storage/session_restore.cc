#include "storage/session_restore.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "sys/syscalls.h"

namespace sandrun::storage {

std::vector<std::string> RestoreHelperArgs(const std::string& session_dir,
                                           const std::string& workspace, uid_t uid, gid_t gid) {
  return {session_dir, workspace, std::to_string(uid), std::to_string(gid)};
}

int RestoreSessionMain(const std::vector<std::string>& args) {
  if (args.size() != 4) {
    std::fprintf(stderr, "usage: sandrund restore-session SESSION_DIR WORKSPACE UID GID\n");
    return kRestoreBadUsage;
  }
  // Ends with the daemon thread that started it (it holds the session lock meanwhile).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  char go = 0;
  if (::read(3, &go, 1) != 1 || go != 'G') return kRestoreFailed;
  ::close(3);
  // The daemon holds the session's lock; this process only needs its directory.
  const SessionLock lock(sys::UniqueFd(), args[0], false);
  const SessionStore store("", "");
  auto restored = store.Restore(lock, args[1], static_cast<uid_t>(std::atol(args[2].c_str())),
                                static_cast<gid_t>(std::atol(args[3].c_str())));
  if (!restored.ok()) {
    std::fprintf(stderr, "%s\n", restored.error().message.c_str());
    return restored.error().kind == ErrorKind::kFileLimit ? kRestoreFileLimit : kRestoreFailed;
  }
  const std::string out = EncodeDigests(*restored);
  return sys::WriteAll(1, out.data(), out.size()) ? kRestoreOk : kRestoreFailed;
}

std::string EncodeDigests(const FileDigests& digests) {
  std::string out;
  for (const auto& [path, hex] : digests) {
    out += hex;
    out.push_back('\0');
    out += path;
    out.push_back('\0');
  }
  return out;
}

Result<FileDigests> DecodeDigests(std::string_view bytes) {
  FileDigests digests;
  while (!bytes.empty()) {
    size_t a = bytes.find('\0');
    size_t b = a == std::string_view::npos ? a : bytes.find('\0', a + 1);
    if (b == std::string_view::npos) return MakeError(ErrorKind::kSystem, "truncated digest list");
    digests[std::string(bytes.substr(a + 1, b - a - 1))] = std::string(bytes.substr(0, a));
    bytes.remove_prefix(b + 1);
  }
  return digests;
}

}  // namespace sandrun::storage
