#include "storage/session_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "storage/digest.h"
#include "storage/signed_link.h"
#include "sys/syscalls.h"
#include "util/text.h"

namespace sandrun::storage {
namespace {

constexpr int kMaxDepth = 64;
constexpr size_t kMaxEntries = 100000;

struct CopyState {
  uid_t uid;
  gid_t gid;
  FileDigests* digests;
  size_t entries = 0;
};

Error CopyError(const std::string& what, const std::string& path) {
  int err = errno;
  std::string code = (err == ENOSPC || err == EDQUOT || err == EFBIG) ? "file_limit" : "storage";
  return MakeError(code, what + " " + path + ": " + std::strerror(err), err);
}

Status CopyFile(int from_dir, int to_dir, const char* name, const std::string& path,
                const struct stat& st, CopyState& state) {
  sys::UniqueFd in(::openat(from_dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!in.valid()) return CopyError("open", path);
  struct stat now;
  if (::fstat(in.get(), &now) != 0 || !S_ISREG(now.st_mode)) return OkStatus();  // swapped: skip
  sys::UniqueFd out(::openat(to_dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                             st.st_mode & 0777));
  if (!out.valid()) return CopyError("create", path);
  Sha256 sha;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(in.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return CopyError("read", path);
    if (n == 0) break;
    sha.Update(buf, static_cast<size_t>(n));
    if (!sys::WriteAll(out.get(), buf, static_cast<size_t>(n))) return CopyError("write", path);
  }
  if (state.uid != static_cast<uid_t>(-1) && ::fchown(out.get(), state.uid, state.gid) != 0) {
    return CopyError("chown", path);
  }
  if (state.digests) (*state.digests)[path] = sha.FinalHex();
  return OkStatus();
}

Status CopyDir(int from_dir, int to_dir, const std::string& prefix, const std::string& skip_top,
               int depth, CopyState& state) {
  if (depth > kMaxDepth) return OkStatus();
  int dup = ::dup(from_dir);
  DIR* dir = dup >= 0 ? ::fdopendir(dup) : nullptr;
  if (dir == nullptr) {
    if (dup >= 0) ::close(dup);
    return CopyError("list", prefix.empty() ? "." : prefix);
  }
  Status status = OkStatus();
  while (struct dirent* e = ::readdir(dir)) {
    const char* name = e->d_name;
    if (std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) continue;
    if (depth == 0 && skip_top == name) continue;
    if (++state.entries > kMaxEntries) break;
    const std::string path = prefix.empty() ? name : prefix + "/" + name;
    struct stat st;
    if (::fstatat(from_dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode)) {
      status = CopyFile(from_dir, to_dir, name, path, st, state);
    } else if (S_ISDIR(st.st_mode)) {
      if (::mkdirat(to_dir, name, st.st_mode & 0777) != 0 && errno != EEXIST) {
        status = CopyError("mkdir", path);
      } else {
        sys::UniqueFd from(
            ::openat(from_dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        sys::UniqueFd to(::openat(to_dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!from.valid() || !to.valid()) continue;
        if (state.uid != static_cast<uid_t>(-1)) (void)::fchown(to.get(), state.uid, state.gid);
        status = CopyDir(from.get(), to.get(), path, skip_top, depth + 1, state);
      }
    }
    // Symlinks, FIFOs, sockets and devices are not carried over.
    if (!status.ok()) break;
  }
  ::closedir(dir);
  return status;
}

// HMAC-derived directory name, as for artifacts: ids never appear on disk.
std::string SessionDirName(const std::string& session, const std::string& key) {
  return UserDir("session:" + session, key);
}

}  // namespace

Status CopyTree(const std::string& from, const std::string& to, const std::string& skip_top,
                uid_t uid, gid_t gid, FileDigests* digests) {
  sys::UniqueFd from_fd(::open(from.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!from_fd.valid()) return CopyError("open", from);
  sys::UniqueFd to_fd(::open(to.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!to_fd.valid()) return CopyError("open", to);
  CopyState state{uid, gid, digests};
  return CopyDir(from_fd.get(), to_fd.get(), "", skip_top, 0, state);
}

Result<SessionLock> SessionStore::Lock(const std::string& user, const std::string& session,
                                       std::chrono::milliseconds wait) const {
  const std::string dir =
      root_ + "/" + UserDir(user, key_) + "/" + SessionDirName(session, key_ + ":" + user);
  if (Status s = sys::MakeDirs(dir + "/files", 0700); !s.ok()) return s.error();
  sys::UniqueFd fd(
      ::open((dir + "/lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return sys::ErrnoError("storage", "open " + dir + "/lock");
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) return sys::ErrnoError("storage", "flock " + dir);
    if (std::chrono::steady_clock::now() >= deadline) {
      return MakeError("session_busy", "another run of this session is still going after " +
                                           std::to_string(wait.count() / 1000) + " s of waiting");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // The lock file's mtime marks the session's last use (idle expiry).
  (void)::futimens(fd.get(), nullptr);
  return SessionLock(std::move(fd), dir);
}

Result<FileDigests> SessionStore::Restore(const SessionLock& lock, const std::string& workspace,
                                          uid_t uid, gid_t gid) const {
  FileDigests digests;
  Status s = CopyTree(lock.dir() + "/files", workspace, "", uid, gid, &digests);
  if (!s.ok()) return s.error();
  return digests;
}

Status SessionStore::Save(const SessionLock& lock, const std::string& workspace) const {
  const std::string next = lock.dir() + "/files.next";
  const std::string old = lock.dir() + "/files.old";
  (void)sys::RemoveTree(next);
  (void)sys::RemoveTree(old);
  if (::mkdir(next.c_str(), 0700) != 0) return sys::ErrnoError("storage", "mkdir " + next);
  Status s = CopyTree(workspace, next, ".sandrun", static_cast<uid_t>(-1), static_cast<gid_t>(-1),
                      nullptr);
  if (!s.ok()) {
    (void)sys::RemoveTree(next);
    return s;
  }
  const std::string files = lock.dir() + "/files";
  if (::rename(files.c_str(), old.c_str()) != 0)
    return sys::ErrnoError("storage", "rename " + files);
  if (::rename(next.c_str(), files.c_str()) != 0) {
    (void)::rename(old.c_str(), files.c_str());
    return sys::ErrnoError("storage", "rename " + next);
  }
  return sys::RemoveTree(old);
}

int SessionStore::SweepIdle(int64_t idle_s) const {
  int removed = 0;
  const time_t now = ::time(nullptr);
  DIR* users = ::opendir(root_.c_str());
  if (users == nullptr) return 0;
  while (struct dirent* u = ::readdir(users)) {
    if (u->d_name[0] == '.') continue;
    const std::string user_dir = root_ + "/" + u->d_name;
    DIR* sessions = ::opendir(user_dir.c_str());
    if (sessions == nullptr) continue;
    while (struct dirent* e = ::readdir(sessions)) {
      if (e->d_name[0] == '.') continue;
      const std::string dir = user_dir + "/" + e->d_name;
      sys::UniqueFd fd(::open((dir + "/lock").c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
      struct stat st;
      if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || now - st.st_mtime < idle_s) continue;
      if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;  // in use now
      if (sys::RemoveTree(dir).ok()) ++removed;
    }
    ::closedir(sessions);
    ::rmdir(user_dir.c_str());  // only succeeds when empty
  }
  ::closedir(users);
  return removed;
}

}  // namespace sandrun::storage
