// The one home of raw syscalls and errno reads (docs/STYLE.md): thin wrappers that turn failures
// into Result errors naming the call. Functions marked "child-safe" are async-signal-safe
// and allocate nothing: they may run in a clone(2)d child of a multi-threaded process.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sys/unique_fd.h"
#include "util/result.h"

namespace sandrun::sys {

// The one errno -> message helper: the text strerror(3) gives for `err` ("No such file or
// directory"), read with strerror_r, so it is thread-safe. Not child-safe (allocates).
std::string ErrnoMessage(int err);

// An Error of kind kSystem with errno and "<what>: <ErrnoMessage(errno)>" as message. Reads
// errno: call right after the failing call. Not child-safe (allocates).
Error ErrnoError(const std::string& what);

// The kind of a failed write's errno: kFileLimit when it means the file or file system is full
// (ENOSPC, EDQUOT, EFBIG), else kSystem.
ErrorKind WriteErrorKind(int err);

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};
// pipe2(O_CLOEXEC). Errors: kSystem.
Result<Pipe> MakePipe();
// fchown of the pipe's inode (shared by both ends) to uid:gid. A pipe is mode 0600 and owned
// by its creator, and opening it again by path (/dev/stdout -> /proc/self/fd/1) checks that
// mode (proc(5) /proc/pid/fd, pipe(7)): a program running as another uid gets EACCES.
// Errors: kSystem. Not child-safe.
Status ChownPipe(const Pipe& pipe, uid_t uid, gid_t gid);

Status SetNonBlocking(int fd);

// Writes all of `data` to a file created/truncated at `path` with `mode`. Not child-safe.
Status WriteFile(const std::string& path, const std::string& data, int mode = 0644);
// Reads a whole (small) file. Errors: open/read failures.
Result<std::string> ReadFile(const std::string& path, size_t max_bytes = 1 << 20);

// mkdir -p with mode. Errors name the path.
Status MakeDirs(const std::string& path, int mode = 0755);
// mkdir(2) of `path` alone. Errors: kSystem naming the path, with its errno (EEXIST when
// something is there already: a caller that accepts that checks Error::err). Not child-safe.
Status MakeDir(const std::string& path, int mode = 0755);
// read(2) of up to `size` bytes, retrying on EINTR: the bytes read, 0 at end of file.
// Errors: "read" naming the fd, with its errno (EAGAIN on an empty non-blocking fd).
// Not child-safe (an error allocates).
Result<size_t> Read(int fd, void* buf, size_t size);
// rm -rf without following symlinks: RemoveTreeAt(AT_FDCWD, path) of sys/tree_walk.h
// (crossing into another mount is refused). Errors name the path.
Status RemoveTree(const std::string& path);
// rmdir(2): removes `path` only if it is an empty directory. Errors name the path
// (ENOTEMPTY: something is still in it). A missing path is not an error.
Status RemoveEmptyDir(const std::string& path);
// rename(2) of `from` to `to` (not replacing: RENAME_NOREPLACE where the file system has it,
// else a plain rename). Errors name both paths. Not child-safe.
Status Rename(const std::string& from, const std::string& to);
// statvfs(2): bytes an unprivileged writer may still use on the file system of `path`
// (f_bavail * f_frsize). Errors name the path. Not child-safe.
Result<uint64_t> AvailableBytes(const std::string& path);

// Mounts a tmpfs of `size_bytes` at `target` owned by uid:gid with mode. Errors: kSystem.
Status MountTmpfs(const std::string& target, uint64_t size_bytes, uid_t uid, gid_t gid, int mode);
// umount2(target, MNT_DETACH). Errors: kSystem.
Status Unmount(const std::string& target);
// umount2(target, MNT_DETACH) until nothing is mounted there any more (mounts stacked on one
// another, as a crashed daemon's leftovers can be; at most 16). Returns how many went. Not
// child-safe.
int UnmountAll(const std::string& target);
// lchown(2): the owner of `path` itself (a symlink is not followed). Errors name the path.
// Not child-safe.
Status Lchown(const std::string& path, uid_t uid, gid_t gid);

// Why `path` (relative to the cwd, and possibly not existing yet) cannot be reached by an
// unprivileged id: "<dir> is not searchable by others (mode NNN)" for the first existing
// directory on it without o+x; "" when reachable. Not child-safe.
std::string FirstUnsearchableDir(const std::string& path);

// pidfd-based wait helpers.
// Blocks until the process behind `pid` exits and reaps it with wait4; returns the wait
// status and resource usage (of the process and its reaped descendants).
struct ExitInfo {
  int wait_status = 0;
  struct rusage usage {};
};
Result<ExitInfo> Reap(pid_t pid);

// Sends SIGKILL to `pidfd`'s process (pidfd_send_signal). Errors ignored when already gone.
void KillPidfd(int pidfd);

// A memfd (MFD_CLOEXEC) holding `data`, positioned at 0. Errors: kSystem.
Result<UniqueFd> MemfdWith(const std::string& name, const std::string& data);

// Opens (creating it, mode 0600, O_CLOEXEC, not through a symlink) and flock(2)s `path`
// exclusively without waiting. The lock lives as long as the fd. Errors: kSystem naming the
// call and path, with EWOULDBLOCK when another open file holds the lock. Not safe after fork.
Result<UniqueFd> TryLockFile(const std::string& path);

// Opens an executable for a later execveat(fd, "", ..., AT_EMPTY_PATH) (O_RDONLY|O_CLOEXEC).
// Errors: kSystem naming the path.
Result<UniqueFd> OpenExecutable(const std::string& path);

// Sets the effective uid of the CALLING THREAD only (the raw setresuid syscall, not glibc's
// all-threads wrapper; credentials are per thread in Linux, credentials(7) "NOTES"). With a
// real and saved uid of 0 the thread can go back with SetThreadEffectiveUid(0). Used so that
// a user namespace made by clone(2) from this thread is owned by `euid`. The thread keeps
// its parent-death signal (PR_SET_PDEATHSIG), which the kernel clears on the change: sent at
// once if the parent died meanwhile. Errors: kSystem.
Status SetThreadEffectiveUid(uid_t euid);

// kill(pid, SIGKILL); false when the process no longer exists (ESRCH) or on error.
bool KillPid(pid_t pid);

// Starts `argv[0]` (absolute path) with `argv` and an empty environment: stdin from
// /dev/null, stdout/stderr to `out_fd`/`err_fd`, `fd3` as its fd 3, every other fd closed
// (posix_spawn: vfork + execve, safe in a multi-threaded process). `new_session`: in a
// session (and process group) of its own, out of reach of a signal to the caller's group.
// Errors: kSystem.
Result<pid_t> Spawn(const std::vector<std::string>& argv, int out_fd, int err_fd, int fd3,
                    bool new_session = false);

// Child-safe helpers ----------------------------------------------------------------------
// write(2) all bytes, retrying on EINTR; returns false on error. Child-safe.
bool WriteAll(int fd, const void* data, size_t size);
// Writes `text` (NUL-terminated) to a path (O_CREAT|O_TRUNC). Child-safe.
bool WriteFileInChild(const char* path, const char* text, size_t size);
// Current errno. Child-safe.
int LastErrno();
// setresgid(2) then setresuid(2) of this thread alone, as raw system calls; false if either
// fails. Child-safe, and the only safe way in a child made by a raw clone(2) of a
// multi-threaded process: glibc's setresuid/setresgid make every thread of the process
// change too (nptl's setxid broadcast, POSIX's rule), from the thread list the child
// inherited; a thread that was starting or exiting at the clone is waited for forever
// (seen as a sandbox launched at start-up, beside threads being created, hanging in
// setxid_mark_thread).
bool SetIdsOfThisThread(uid_t uid, gid_t gid);

// The CPUs this process may run on (sched_getaffinity(2): a cpuset or taskset counts), at
// least 1.
int64_t UsableCpus();
// Tasks on the host's run queues now, the caller included (RunnableTasksOf /proc/loadavg), or
// -1 when it cannot be read.
int64_t RunnableTasks();
// The fourth field of a /proc/loadavg text before its '/' ("0.15 0.03 0.01 2/123 4567" -> 2,
// proc(5)), or -1 when the text is not of that form. Pure.
int64_t RunnableTasksOf(const std::string& loadavg);

}  // namespace sandrun::sys
