#include "sys/namespace_probe.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "sys/syscalls.h"

namespace sandrun::sys {

Status ProbeNamespaces(uid_t owner, unsigned long flags) {
  const bool as_owner = ::geteuid() == 0 && owner != 0;
  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoError("fork");
  if (pid == 0) {
    // Only async-signal-safe calls: the parent may have threads.
    if (as_owner && ::syscall(SYS_setresuid, -1, owner, -1) != 0) ::_exit(255);
    ::_exit(::unshare(static_cast<int>(flags)) == 0 ? 0 : std::min(errno, 254));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return ErrnoError("waitpid");
  }
  const std::string call = "unshare(CLONE_NEWUSER|...)" +
                           (as_owner ? " as uid " + std::to_string(owner) : std::string());
  if (WIFSIGNALED(status)) {
    return MakeError(ErrorKind::kSystem,
                     call + ": killed by signal " + std::to_string(WTERMSIG(status)));
  }
  const int code = WEXITSTATUS(status);
  if (code == 0) return OkStatus();
  if (code == 255)
    return MakeError(ErrorKind::kSystem, "setresuid to uid " + std::to_string(owner));
  return MakeError(ErrorKind::kSystem, call + ": " + ErrnoMessage(code), code);
}

Result<bool> InChroot() {
  struct statx ours {};
  constexpr unsigned kMask = STATX_INO | STATX_MNT_ID;
  if (::statx(AT_FDCWD, "/", 0, kMask, &ours) != 0) return ErrnoError("statx /");
  if ((ours.stx_mask & STATX_MNT_ID) == 0) {
    return MakeError(ErrorKind::kSystem, "statx / gives no mount id (Linux 5.8 or later does)");
  }
  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoError("fork");
  if (pid == 0) {
    // Only async-signal-safe calls: the parent may have threads.
    const int ns = ::open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
    struct statx root {};
    if (ns < 0 || ::setns(ns, CLONE_NEWNS) != 0 || ::statx(AT_FDCWD, "/", 0, kMask, &root) != 0) {
      ::_exit(2);
    }
    const bool same = root.stx_mnt_id == ours.stx_mnt_id && root.stx_ino == ours.stx_ino &&
                      root.stx_dev_major == ours.stx_dev_major &&
                      root.stx_dev_minor == ours.stx_dev_minor;
    ::_exit(same ? 0 : 1);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return ErrnoError("waitpid");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) > 1) {
    return MakeError(ErrorKind::kSystem,
                     "could not enter this process's mount namespace to compare its root");
  }
  return WEXITSTATUS(status) == 1;
}

}  // namespace sandrun::sys
