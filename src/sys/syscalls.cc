#include "sys/syscalls.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "sys/tree_walk.h"

namespace sandrun::sys {

std::string ErrnoMessage(int err) {
  char buf[256];
  // The GNU strerror_r: returns the message, in `buf` or a static string.
  return ::strerror_r(err, buf, sizeof buf);
}

Error ErrnoError(const std::string& what) {
  int err = errno;
  return MakeError(ErrorKind::kSystem, what + ": " + ErrnoMessage(err), err);
}

ErrorKind WriteErrorKind(int err) {
  return err == ENOSPC || err == EDQUOT || err == EFBIG ? ErrorKind::kFileLimit
                                                        : ErrorKind::kSystem;
}

Result<Pipe> MakePipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoError("pipe2");
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

Status ChownPipe(const Pipe& pipe, uid_t uid, gid_t gid) {
  if (::fchown(pipe.read.get(), uid, gid) != 0) {
    return ErrnoError("fchown pipe to " + std::to_string(uid) + ":" + std::to_string(gid));
  }
  return OkStatus();
}

Status SetNonBlocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return ErrnoError("fcntl(O_NONBLOCK)");
  }
  return OkStatus();
}

Status WriteFile(const std::string& path, const std::string& data, int mode) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode));
  if (!fd.valid()) return ErrnoError("open " + path);
  if (!WriteAll(fd.get(), data.data(), data.size())) {
    return ErrnoError("write " + path);
  }
  return OkStatus();
}

Result<std::string> ReadFile(const std::string& path, size_t max_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError("open " + path);
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("read " + path);
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes)
      return MakeError(ErrorKind::kSystem, path + ": larger than expected");
  }
  return out;
}

Status MakeDirs(const std::string& path, int mode) {
  // The directory itself first, its parents only when it cannot be made (ENOENT): most calls
  // make one directory in a parent that exists, with one mkdir(2) instead of one per level.
  if (path.empty() || ::mkdir(path.c_str(), static_cast<mode_t>(mode)) == 0 || errno == EEXIST) {
    return OkStatus();
  }
  if (errno != ENOENT) return ErrnoError("mkdir " + path);
  const size_t end = path.find_last_not_of('/');
  const size_t slash = end == std::string::npos ? std::string::npos : path.rfind('/', end);
  if (slash == std::string::npos || slash == 0) return ErrnoError("mkdir " + path);
  if (Status s = MakeDirs(path.substr(0, slash), mode); !s.ok()) return s;
  if (::mkdir(path.c_str(), static_cast<mode_t>(mode)) != 0 && errno != EEXIST) {
    return ErrnoError("mkdir " + path);
  }
  return OkStatus();
}

Status MakeDir(const std::string& path, int mode) {
  if (::mkdir(path.c_str(), static_cast<mode_t>(mode)) != 0) {
    return ErrnoError("mkdir " + path);
  }
  return OkStatus();
}

Result<size_t> Read(int fd, void* buf, size_t size) {
  for (;;) {
    const ssize_t n = ::read(fd, buf, size);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR) return ErrnoError("read fd " + std::to_string(fd));
  }
}

Status RemoveEmptyDir(const std::string& path) {
  if (::rmdir(path.c_str()) != 0 && errno != ENOENT) return ErrnoError("rmdir " + path);
  return OkStatus();
}

Status Rename(const std::string& from, const std::string& to) {
  // cgroupfs (kernfs) has no RENAME_NOREPLACE (EINVAL): a plain rename there.
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) {
    return OkStatus();
  }
  if (errno == EINVAL && ::rename(from.c_str(), to.c_str()) == 0) return OkStatus();
  return ErrnoError("rename " + from + " to " + to);
}

Result<uint64_t> AvailableBytes(const std::string& path) {
  struct statvfs fs;
  if (::statvfs(path.c_str(), &fs) != 0) return ErrnoError("statvfs " + path);
  return static_cast<uint64_t>(fs.f_bavail) * static_cast<uint64_t>(fs.f_frsize);
}

Status RemoveTree(const std::string& path) { return RemoveTreeAt(AT_FDCWD, path); }

Status MountTmpfs(const std::string& target, uint64_t size_bytes, uid_t uid, gid_t gid, int mode) {
  std::string options = "size=" + std::to_string(size_bytes) +
                        ",mode=" + std::to_string(mode / 64) + std::to_string((mode / 8) % 8) +
                        std::to_string(mode % 8) + ",uid=" + std::to_string(uid) +
                        ",gid=" + std::to_string(gid);
  if (::mount("tmpfs", target.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) != 0) {
    return ErrnoError("mount tmpfs on " + target + " (" + options + ")");
  }
  return OkStatus();
}

Status Unmount(const std::string& target) {
  if (::umount2(target.c_str(), MNT_DETACH) != 0) return ErrnoError("umount " + target);
  return OkStatus();
}

int UnmountAll(const std::string& target) {
  int n = 0;
  while (n < 16 && ::umount2(target.c_str(), MNT_DETACH) == 0) ++n;
  return n;
}

Status Lchown(const std::string& path, uid_t uid, gid_t gid) {
  if (::lchown(path.c_str(), uid, gid) != 0) return ErrnoError("lchown " + path);
  return OkStatus();
}

Result<ExitInfo> Reap(pid_t pid) {
  ExitInfo info;
  for (;;) {
    pid_t r = ::wait4(pid, &info.wait_status, __WALL, &info.usage);
    if (r == pid) return info;
    if (r < 0 && errno == EINTR) continue;
    return ErrnoError("wait4 " + std::to_string(pid));
  }
}

Result<UniqueFd> MemfdWith(const std::string& name, const std::string& data) {
  UniqueFd fd(static_cast<int>(::syscall(SYS_memfd_create, name.c_str(), MFD_CLOEXEC)));
  if (!fd.valid()) return ErrnoError("memfd_create " + name);
  if (!WriteAll(fd.get(), data.data(), data.size())) return ErrnoError("write " + name);
  if (::lseek(fd.get(), 0, SEEK_SET) != 0) return ErrnoError("lseek " + name);
  return fd;
}

Result<UniqueFd> TryLockFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return ErrnoError("open " + path);
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EINTR) return ErrnoError("flock " + path);
  }
  return fd;
}

Result<UniqueFd> OpenExecutable(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError("open " + path);
  return fd;
}

Status SetThreadEffectiveUid(uid_t euid) {
  // A change of the effective uid clears the thread's parent-death signal (prctl(2)). The
  // daemon's main thread makes the self-test's sandbox with this, and loses what
  // `setpriv --pdeathsig TERM` gave it: scripts/serve dead, sandrund ran on as an orphan.
  int death_signal = 0;
  ::prctl(PR_GET_PDEATHSIG, &death_signal);
  const pid_t parent = ::getppid();
  if (::syscall(SYS_setresuid, -1, euid, -1) != 0) {
    return ErrnoError("setresuid(-1, " + std::to_string(euid) + ", -1)");
  }
  if (death_signal != 0) {
    ::prctl(PR_SET_PDEATHSIG, death_signal, 0, 0, 0);
    // The parent died while the signal was off: it is due now.
    if (::getppid() != parent) ::kill(::getpid(), death_signal);
  }
  return OkStatus();
}

bool KillPid(pid_t pid) { return ::kill(pid, SIGKILL) == 0; }

Result<pid_t> Spawn(const std::vector<std::string>& argv, int out_fd, int err_fd, int fd3,
                    bool new_session) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  char* no_env[] = {nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, err_fd, 2);
  posix_spawn_file_actions_adddup2(&actions, fd3, 3);
  posix_spawn_file_actions_addclosefrom_np(&actions, 4);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  if (new_session) posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, args[0], &actions, &attr, args.data(), no_env);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return MakeError(ErrorKind::kSystem, "posix_spawn " + argv[0] + ": " + ErrnoMessage(rc), rc);
  }
  return pid;
}

void KillPidfd(int pidfd) {
  if (pidfd >= 0) ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
}

bool WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool WriteFileInChild(const char* path, const char* text, size_t size) {
  int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return false;
  bool ok = WriteAll(fd, text, size);
  ::close(fd);
  return ok;
}

int LastErrno() { return errno; }

bool SetIdsOfThisThread(uid_t uid, gid_t gid) {
  return ::syscall(SYS_setresgid, gid, gid, gid) == 0 &&
         ::syscall(SYS_setresuid, uid, uid, uid) == 0;
}

std::string FirstUnsearchableDir(const std::string& path) {
  char cwd[4096];
  std::string absolute = path;
  if (absolute.empty() || absolute[0] != '/') {
    if (::getcwd(cwd, sizeof cwd) == nullptr) return "";
    absolute = std::string(cwd) + "/" + path;
  }
  std::string prefix;
  size_t pos = 0;
  while (pos < absolute.size()) {
    size_t next = absolute.find('/', pos + 1);
    if (next == std::string::npos) next = absolute.size();
    prefix = absolute.substr(0, next);
    struct stat st;
    if (::stat(prefix.c_str(), &st) != 0) break;  // created later with mode 0755
    if (S_ISDIR(st.st_mode) && (st.st_mode & S_IXOTH) == 0) {
      return prefix + " is not searchable by others (mode " +
             std::to_string((st.st_mode >> 6) & 7) + std::to_string((st.st_mode >> 3) & 7) +
             std::to_string(st.st_mode & 7) + ")";
    }
    pos = next;
  }
  return "";
}

int64_t UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

int64_t RunnableTasks() {
  auto text = ReadFile("/proc/loadavg", 256);
  return text.ok() ? RunnableTasksOf(*text) : -1;
}

int64_t RunnableTasksOf(const std::string& loadavg) {
  // Three averages, then "running/total".
  size_t at = 0;
  for (int field = 0; field < 3; ++field) {
    at = loadavg.find(' ', at);
    if (at == std::string::npos) return -1;
    ++at;
  }
  const size_t slash = loadavg.find('/', at);
  if (slash == std::string::npos || slash == at || slash - at > 18) return -1;
  int64_t n = 0;
  for (size_t i = at; i < slash; ++i) {
    if (loadavg[i] < '0' || loadavg[i] > '9') return -1;
    n = n * 10 + (loadavg[i] - '0');
  }
  return n;
}

}  // namespace sandrun::sys
