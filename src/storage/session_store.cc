#include "storage/session_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "storage/digest.h"
#include "storage/file_copy.h"
#include "storage/fs.h"
#include "storage/signed_link.h"
#include "sys/syscalls.h"
#include "sys/tree_walk.h"
#include "util/reserved_dirs.h"
#include "util/text.h"

namespace sandrun::storage {
namespace {

constexpr int kMaxDepth = 64;
constexpr uint64_t kMaxEntries = 100000;
constexpr char kUsageFile[] = "usage";  // <session dir>/usage: "<entries> <bytes>\n"

Error CopyError(const char* call, const std::string& path) {
  const int err = LastErrno();
  Error error = StorageError(call, path, err);
  error.kind = sys::WriteErrorKind(err);
  return error;
}

Error OverBudget(const std::string& what) { return MakeError(ErrorKind::kOverBudget, what); }

// Entries a copy may have: its budget's, and never more than kMaxEntries.
uint64_t EntryBound(const CopyTreeOptions& options) {
  return std::min(options.budget.max_entries, kMaxEntries);
}

// The walk's bounds: kMaxDepth, and EntryBound entries (plus skip_top's one), so that the
// walk reads no more names than the copy could take (a directory of 100000 empty files costs
// neither their names in memory nor their copies). Entries it walks but does not copy
// (symlinks, FIFOs, ...) count too.
sys::TreeLimits CopyLimits(const CopyTreeOptions& options) {
  sys::TreeLimits limits;
  limits.max_depth = kMaxDepth;
  limits.max_entries = EntryBound(options) + (options.skip_top.empty() ? 0 : 1);
  return limits;
}

// One copy of a tree (CopyTree), as a visitor of sys::WalkTree. Keeps the first destination
// path of every source inode with more than one link, so its other names become links of
// the one copy. The first failure stops the walk and is kept in status(): a copy that did
// not finish is never a success, whatever stopped it.
class TreeCopier : public sys::TreeVisitor {
 public:
  TreeCopier(const CopyTreeOptions& options, int to_root) : options_(options) {
    to_dirs_.push_back(to_root);
  }

  sys::TreeStep Enter(const sys::TreeEntry& entry) override;
  void Unreadable(const sys::TreeEntry& entry, int err) override {
    Fail(StorageError("openat", entry.path, err));
  }
  const Status& status() const { return status_; }
  const Usage& usage() const { return usage_; }

 private:
  struct FirstCopy {
    std::string path;  // relative to the destination root
    std::string sha256;
  };

  Status CopyFile(const sys::TreeEntry& entry, int to_dir);
  Status MakeDir(const sys::TreeEntry& entry, int to_dir);
  Status AddEntry(const std::string& path);
  bool Owned() const { return options_.uid != static_cast<uid_t>(-1); }
  sys::TreeStep Fail(Error error) {
    if (status_.ok()) status_ = std::move(error);
    return sys::TreeStep::kStop;
  }

  const CopyTreeOptions& options_;
  // to_dirs_[d]: the copy of the directory whose entries are at depth d (0: the root, not
  // owned). Entries come in pre-order, so [0, d] are the copies of an entry's ancestors.
  std::vector<int> to_dirs_;
  std::vector<UniqueFd> owned_dirs_;  // to_dirs_[d + 1] is owned_dirs_[d]
  Usage usage_;
  Status status_ = OkStatus();
  std::map<std::pair<dev_t, ino_t>, FirstCopy> linked_;
};

sys::TreeStep TreeCopier::Enter(const sys::TreeEntry& entry) {
  if (!status_.ok()) return sys::TreeStep::kStop;  // an unreadable directory since
  if (entry.depth == 0 && !options_.skip_top.empty() && entry.name == options_.skip_top) {
    return sys::TreeStep::kSkip;
  }
  to_dirs_.resize(entry.depth + 1);
  owned_dirs_.resize(entry.depth);
  const int to_dir = to_dirs_.back();
  Status s = OkStatus();
  if (S_ISREG(entry.st.st_mode)) {
    s = CopyFile(entry, to_dir);
  } else if (S_ISDIR(entry.st.st_mode)) {
    s = MakeDir(entry, to_dir);
  }  // symlinks, FIFOs, sockets and devices are not carried over
  if (!s.ok()) return Fail(s.error());
  return sys::TreeStep::kDescend;
}

Status TreeCopier::AddEntry(const std::string& path) {
  const uint64_t max = EntryBound(options_);
  if (usage_.files + 1 > max) {
    return OverBudget("more than " + std::to_string(max) + " files and directories (at " + path +
                      ")");
  }
  usage_.files += 1;
  return OkStatus();
}

Status TreeCopier::MakeDir(const sys::TreeEntry& entry, int to_dir) {
  if (Status s = AddEntry(entry.path); !s.ok()) return s;
  if (mkdirat(to_dir, entry.name.c_str(), entry.st.st_mode & 0777) != 0 && LastErrno() != EEXIST) {
    return CopyError("mkdirat", entry.path);
  }
  UniqueFd to = OpenDirAt(to_dir, entry.name);
  if (!to.valid()) return CopyError("openat", entry.path);
  if (Owned() && fchown(to.get(), options_.uid, options_.gid) != 0) {
    return CopyError("fchown", entry.path);
  }
  to_dirs_.push_back(to.get());  // where this directory's entries (depth + 1) go
  owned_dirs_.push_back(std::move(to));
  return OkStatus();
}

Status TreeCopier::CopyFile(const sys::TreeEntry& entry, int to_dir) {
  const std::string& path = entry.path;
  UniqueFd in(
      openat(entry.dirfd, entry.name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!in.valid()) return CopyError("openat", path);
  struct stat st;
  if (fstat(in.get(), &st) != 0 || !S_ISREG(st.st_mode)) return OkStatus();  // swapped: skip
  if (Status s = AddEntry(path); !s.ok()) return s;
  const auto key = std::make_pair(st.st_dev, st.st_ino);
  if (st.st_nlink > 1) {
    if (auto it = linked_.find(key); it != linked_.end()) {
      // Another name of an inode already copied: link it, as the source is. The relative
      // path resolves inside the tree this copy made (only directories we created).
      if (linkat(to_dirs_[0], it->second.path.c_str(), to_dir, entry.name.c_str(), 0) != 0) {
        return CopyError("linkat", path);
      }
      if (options_.digests) (*options_.digests)[path] = it->second.sha256;
      return OkStatus();
    }
  }
  if (usage_.bytes + BytesOnDisk(st) > options_.budget.max_bytes) {
    return OverBudget("more than " + std::to_string(options_.budget.max_bytes) +
                      " bytes on disk (at " + path + ")");
  }
  UniqueFd out(openat(to_dir, entry.name.c_str(),
                      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, st.st_mode & 0777));
  if (!out.valid()) return CopyError("openat", path);
  Sha256 sha;
  CopyObserver observe;
  if (options_.digests) observe = [&sha](const char* data, size_t size) { sha.Update(data, size); };
  auto copied = CopyFileKeepingHoles(in.get(), out.get(), TreeBudget::kUnbounded, path, observe);
  if (!copied.ok()) return copied.error();
  usage_.bytes += copied->bytes_on_disk;
  if (Owned() && fchown(out.get(), options_.uid, options_.gid) != 0) {
    return CopyError("fchown", path);
  }
  std::string digest = options_.digests ? sha.FinalHex() : "";
  if (st.st_nlink > 1) linked_[key] = {path, digest};
  if (options_.digests) (*options_.digests)[path] = std::move(digest);
  return OkStatus();
}

// The error for a copy the walk stopped at one of CopyLimits (worded as before the walker).
Error WalkLimitError(const std::string& from, const CopyTreeOptions& options,
                     const sys::TreeReport& report) {
  const std::string at = " (at " + report.stopped_at + ")";
  switch (report.stop) {
    case sys::TreeStop::kDepth:
      return OverBudget("deeper than " + std::to_string(kMaxDepth) + " directories" + at);
    case sys::TreeStop::kEntries:
      return OverBudget("more than " + std::to_string(EntryBound(options)) +
                        " files and directories" + at);
    case sys::TreeStop::kRootOpen:
      return StorageError("readdir", from, report.err);
    default:
      return MakeError(ErrorKind::kSystem, from + ": " + report.Describe(CopyLimits(options)));
  }
}

// The usage of the session directory `dir`: its record, else a measure of its files.
Usage SessionUsage(const std::string& dir) {
  Usage usage;
  if (auto text = sys::ReadFile(dir + "/" + kUsageFile, 256); text.ok()) {
    std::istringstream in(*text);
    if (in >> usage.files >> usage.bytes) return usage;
    usage = Usage{};
  }
  UniqueFd files(open((dir + "/files").c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!files.valid()) return usage;
  // Bounded like CopyTree, which made the tree: a stop means the directory was changed
  // behind the store's back, and the measure is then a lower bound.
  const sys::TreeReport report =
      sys::MeasureTree(files.get(), sys::TreeLimits{kMaxDepth, kMaxEntries});
  return Usage{report.entries, report.bytes_on_disk};
}

// What the other sessions in the user directory `user_dir` hold, besides `self` (a name).
Usage OtherSessionsUsage(const std::string& user_dir, const std::string& self) {
  Usage total;
  bool truncated = false;
  UniqueFd fd(open(user_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return total;
  auto names = ListDir(fd.get(), SIZE_MAX, &truncated);
  if (!names.ok()) return total;
  for (const std::string& name : *names) {
    if (name != self && name[0] != '.') total += SessionUsage(user_dir + "/" + name);
  }
  return total;
}

std::string Parent(const std::string& dir) { return dir.substr(0, dir.rfind('/')); }
std::string BaseName(const std::string& dir) { return dir.substr(dir.rfind('/') + 1); }

// The user directory open and flock(2)ed: the budget check and the rename of one session's
// Save must not interleave with another session's of the same user.
Result<UniqueFd> LockUserDir(const std::string& user_dir) {
  UniqueFd fd(open(user_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return StorageError("open", user_dir, LastErrno());
  while (flock(fd.get(), LOCK_EX) != 0) {
    if (LastErrno() != EINTR) return StorageError("flock", user_dir, LastErrno());
  }
  return fd;
}

// After a crash between Save's two renames, `files` is missing and `files.old` holds the
// last complete copy: put it back. A new session gets an empty `files`.
Status RecoverFiles(const std::string& dir) {
  const std::string files = dir + "/files";
  const std::string old = dir + "/files.old";
  struct stat st;
  if (lstat(files.c_str(), &st) == 0) return OkStatus();
  if (LastErrno() != ENOENT) return StorageError("lstat", files, LastErrno());
  if (rename(old.c_str(), files.c_str()) == 0) return OkStatus();
  if (LastErrno() != ENOENT) return StorageError("rename", old, LastErrno());
  if (mkdir(files.c_str(), 0700) != 0) return StorageError("mkdir", files, LastErrno());
  return OkStatus();
}

Status WriteUsage(const std::string& dir, const Usage& usage) {
  const std::string tmp = dir + "/" + kUsageFile + ".tmp";
  Status s = sys::WriteFile(
      tmp, std::to_string(usage.files) + " " + std::to_string(usage.bytes) + "\n", 0600);
  if (s.ok() && rename(tmp.c_str(), (dir + "/" + kUsageFile).c_str()) != 0) {
    s = StorageError("rename", tmp, LastErrno());
  }
  return s;
}

// HMAC-derived directory name, as for artifacts: ids never appear on disk.
std::string SessionDirName(const std::string& session, const std::string& key) {
  return UserDir("session:" + session, key);
}

}  // namespace

TreeBudget BudgetLeft(const Quota& quota, const Usage& used) {
  TreeBudget budget;
  if (quota.max_files != 0)
    budget.max_entries = quota.max_files - std::min(quota.max_files, used.files);
  if (quota.max_bytes != 0)
    budget.max_bytes = quota.max_bytes - std::min(quota.max_bytes, used.bytes);
  return budget;
}

Result<Usage> CopyTree(const std::string& from, const std::string& to,
                       const CopyTreeOptions& options) {
  UniqueFd from_fd(open(from.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!from_fd.valid()) return CopyError("open", from);
  UniqueFd to_fd(open(to.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!to_fd.valid()) return CopyError("open", to);
  TreeCopier copier(options, to_fd.get());
  const sys::TreeReport report = sys::WalkTree(from_fd.get(), CopyLimits(options), copier);
  if (!copier.status().ok()) return copier.status().error();
  if (!report.complete()) return WalkLimitError(from, options, report);
  return copier.usage();
}

std::string SessionStore::UserPath(const std::string& user) const {
  return root_ + "/" + UserDir(user, key_);
}

Result<SessionLock> SessionStore::Lock(const std::string& user, const std::string& session,
                                       std::chrono::milliseconds wait) const {
  const std::string dir = UserPath(user) + "/" + SessionDirName(session, key_ + ":" + user);
  // Not `files` itself: it is made (or recovered) under the lock. The session's own directory
  // by one mkdir, so that exactly one of two first runs at once learns it created it.
  if (Status s = sys::MakeDirs(UserPath(user), 0700); !s.ok()) return s.error();
  bool created = true;
  if (::mkdir(dir.c_str(), 0700) != 0) {
    if (LastErrno() != EEXIST) return StorageError("mkdir", dir, LastErrno());
    created = false;
  }
  sys::UniqueFd fd(
      ::open((dir + "/lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return sys::ErrnoError("open " + dir + "/lock");
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    const int err = LastErrno();
    if (err != EWOULDBLOCK && err != EINTR) return StorageError("flock", dir, err);
    if (std::chrono::steady_clock::now() >= deadline) {
      return MakeError(ErrorKind::kBusy, "another run of this session is still going after " +
                                             std::to_string(wait.count() / 1000) + " s of waiting");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (Status s = RecoverFiles(dir); !s.ok()) return s.error();
  // The lock file's mtime marks the session's last use (idle expiry).
  (void)::futimens(fd.get(), nullptr);
  return SessionLock(std::move(fd), dir, created);
}

bool SessionStore::HasFiles(const SessionLock& lock) const {
  DIR* d = opendir((lock.dir() + "/files").c_str());
  if (d == nullptr) return true;  // unreadable: let Restore say why
  bool any = false;
  while (const dirent* e = readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      any = true;
      break;
    }
  }
  closedir(d);
  return any;
}

Result<FileDigests> SessionStore::Restore(const SessionLock& lock, const std::string& workspace,
                                          uid_t uid, gid_t gid) const {
  FileDigests digests;
  CopyTreeOptions options;
  options.uid = uid;
  options.gid = gid;
  options.digests = &digests;
  auto copied = CopyTree(lock.dir() + "/files", workspace, options);
  if (!copied.ok()) return copied.error();
  return digests;
}

Status SessionStore::Save(const SessionLock& lock, const std::string& workspace,
                          const Quota& quota) const {
  const std::string next = lock.dir() + "/files.next";
  const std::string old = lock.dir() + "/files.old";
  const std::string user_dir = Parent(lock.dir());
  const std::string self = BaseName(lock.dir());
  (void)sys::RemoveTree(next);
  (void)sys::RemoveTree(old);
  if (::mkdir(next.c_str(), 0700) != 0) return sys::ErrnoError("mkdir " + next);
  // The copy stops at the budget the other sessions leave, so a refused session costs the
  // host no more than an accepted one could.
  CopyTreeOptions options;
  options.skip_top = util::kProgramDir;
  options.budget = BudgetLeft(quota, OtherSessionsUsage(user_dir, self));
  auto copied = CopyTree(workspace, next, options);
  if (!copied.ok()) {
    (void)sys::RemoveTree(next);
    return copied.error();
  }
  // Checked again under the user's lock: another session of this user may have grown since.
  auto user_lock = LockUserDir(user_dir);
  if (!user_lock.ok()) {
    (void)sys::RemoveTree(next);
    return user_lock.error();
  }
  const Usage others = OtherSessionsUsage(user_dir, self);
  Usage total = others;
  total += *copied;
  if (!Fits(total, quota)) {
    (void)sys::RemoveTree(next);
    return OverBudget("with the user's other sessions (" + std::to_string(others.files) +
                      " files and directories, " + std::to_string(others.bytes) +
                      " bytes on disk) it is over the per-user quota");
  }
  const std::string files = lock.dir() + "/files";
  if (::rename(files.c_str(), old.c_str()) != 0) {
    (void)sys::RemoveTree(next);
    return sys::ErrnoError("rename " + files);
  }
  // A crash here leaves files.old and no files: Lock renames it back.
  if (::rename(next.c_str(), files.c_str()) != 0) {
    Status s = sys::ErrnoError("rename " + next);
    (void)::rename(old.c_str(), files.c_str());
    return s;
  }
  // A crash before this leaves a stale record, corrected by the next Save.
  (void)WriteUsage(lock.dir(), *copied);
  return sys::RemoveTree(old);
}

Usage SessionStore::UserUsage(const std::string& user) const {
  return OtherSessionsUsage(UserPath(user), "");
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
