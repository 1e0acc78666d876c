#include "storage/user_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <optional>

#include "storage/digest.h"
#include "storage/file_copy.h"
#include "sys/tree_walk.h"
#include "util/text.h"

namespace sandrun::storage {
namespace {

constexpr mode_t kDirMode = 0755;  // nginx (another user) must be able to read
constexpr mode_t kFileMode = 0644;
// A user directory found unlinked after the lock wait is retried; more than a few rounds
// would mean the janitor and a publisher are livelocked, which cannot last this long.
constexpr int kLockAttempts = 100;
constexpr size_t kMaxRecordBytes = 4096;

int FlockRetrying(int fd, int operation) {
  while (flock(fd, operation) != 0) {
    if (LastErrno() != EINTR) return LastErrno();
  }
  return 0;
}

// Bounds of the walk that measures a run without a record: as deep as the export walk goes.
constexpr sys::TreeLimits kMeasureLimits{64, UINT64_MAX, UINT64_MAX};

// Counts the regular files of a run directory and their bytes on disk (as Publish counts,
// file_copy.h), leaving out the run record directory, which is the store's, not the user's.
class RunMeasure : public sys::TreeVisitor {
 public:
  sys::TreeStep Enter(const sys::TreeEntry& entry) override {
    if (entry.depth == 0 && entry.name == kRecordDir) return sys::TreeStep::kSkip;
    if (S_ISREG(entry.st.st_mode)) {
      usage.files += 1;
      usage.bytes += BytesOnDisk(entry.st);
    }
    return sys::TreeStep::kDescend;
  }
  Usage usage;
};

// The usage of the run directory `fd`. A walk stopped at the depth bound leaves a lower
// bound; the export walk of the same run would not have listed the deeper files either.
Usage Measure(int fd) {
  RunMeasure measure;
  sys::WalkTree(fd, kMeasureLimits, measure);
  return measure.usage;
}

// The record of the run directory `run_fd`, or nullopt when it has none that parses.
std::optional<RunInfo> ReadRecord(int run_fd) {
  UniqueFd dir = OpenDirAt(run_fd, kRecordDir);
  if (!dir.valid()) return std::nullopt;
  UniqueFd file(openat(dir.get(), kRecordFile, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!file.valid()) return std::nullopt;
  std::string text(kMaxRecordBytes, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = read(file.get(), text.data() + got, text.size() - got);
    if (n < 0 && LastErrno() == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return ParseRunRecord(text);
}

}  // namespace

bool IsRunId(const std::string& name) {
  return !name.empty() && name.size() <= 200 && name[0] != '.' &&
         name.find('/') == std::string::npos && name.find('\0') == std::string::npos;
}

Result<UserDirLock> UserDirLock::Acquire(int root_fd, const std::string& name, bool create,
                                         const std::string& path) {
  for (int attempt = 0; attempt < kLockAttempts; ++attempt) {
    bool created = false;
    if (create) {
      created = mkdirat(root_fd, name.c_str(), kDirMode) == 0;
      if (!created && LastErrno() != EEXIST) return StorageError("mkdirat", path, LastErrno());
    }
    UniqueFd fd = OpenDirAt(root_fd, name);
    if (!fd.valid()) {
      const int err = LastErrno();
      if (err == ENOENT && create) continue;  // removed between mkdirat and openat
      if (err == ENOENT) return UserDirLock();
      return StorageError("openat", path, err);
    }
    // mkdirat's mode is filtered by the umask; nginx still has to be able to read.
    if (created && fchmod(fd.get(), kDirMode) != 0) {
      return StorageError("fchmod", path, LastErrno());
    }
    if (const int err = FlockRetrying(fd.get(), LOCK_EX); err != 0) {
      return StorageError("flock", path, err);
    }
    // An empty user directory may have been removed by the janitor while we waited: a
    // removed directory has no links left. Then our fd names nothing nginx can see.
    struct stat st;
    if (fstat(fd.get(), &st) != 0) return StorageError("fstat", path, LastErrno());
    if (st.st_nlink == 0) {
      if (!create) return UserDirLock();
      continue;
    }
    UserDirLock lock;
    lock.fd_ = std::move(fd);
    lock.path_ = path;
    lock.locked_ = true;
    return lock;
  }
  return MakeError(ErrorKind::kSystem, "cannot lock " + path + ": it keeps being removed");
}

void UserDirLock::Unlock() {
  if (locked_ && fd_.valid()) FlockRetrying(fd_.get(), LOCK_UN);
  locked_ = false;
}

Status UserDirLock::Relock() {
  if (locked_) return OkStatus();
  if (const int err = FlockRetrying(fd_.get(), LOCK_EX); err != 0) {
    return StorageError("flock", path_, err);
  }
  locked_ = true;
  return OkStatus();
}

Result<std::vector<RunInfo>> ScanRuns(int user_fd, const std::string& path) {
  bool truncated = false;
  auto names = ListDir(user_fd, SIZE_MAX, &truncated);
  if (!names.ok()) return names.error();
  std::vector<RunInfo> runs;
  for (const std::string& name : *names) {
    if (!IsRunId(name)) continue;
    UniqueFd run_fd = OpenDirAt(user_fd, name);
    if (!run_fd.valid()) continue;  // not a directory (nothing of ours), or just removed
    std::optional<RunInfo> record = ReadRecord(run_fd.get());
    RunInfo run;
    if (record) {
      run = *record;
    } else {
      struct stat st;
      if (fstat(run_fd.get(), &st) != 0)
        return StorageError("fstat", path + "/" + name, LastErrno());
      run.created_at = st.st_mtime;
      run.live_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
      run.usage = Measure(run_fd.get());
    }
    run.run_id = name;
    runs.push_back(std::move(run));
  }
  return runs;
}

Status WriteRunRecord(int run_fd, const RunInfo& run, const std::string& path) {
  const std::string dir_path = path + "/" + kRecordDir;
  if (mkdirat(run_fd, kRecordDir, 0700) != 0 && LastErrno() != EEXIST) {
    return StorageError("mkdirat", dir_path, LastErrno());
  }
  UniqueFd dir = OpenDirAt(run_fd, kRecordDir);
  if (!dir.valid()) return StorageError("openat", dir_path, LastErrno());
  auto temp = RandomName(".tmp-");
  if (!temp.ok()) return temp.error();
  const std::string file_path = dir_path + "/" + kRecordFile;
  UniqueFd out(openat(dir.get(), temp->c_str(),
                      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, kFileMode));
  if (!out.valid()) return StorageError("openat", file_path + " (temporary)", LastErrno());
  const std::string text = EncodeRunRecord(run);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(out.get(), text.data() + done, text.size() - done);
    if (n < 0 && LastErrno() == EINTR) continue;
    if (n < 0) {
      const int err = LastErrno();
      unlinkat(dir.get(), temp->c_str(), 0);
      return StorageError("write", file_path, err);
    }
    done += static_cast<size_t>(n);
  }
  if (close(out.Release()) != 0 ||
      renameat(dir.get(), temp->c_str(), dir.get(), kRecordFile) != 0) {
    const int err = LastErrno();
    unlinkat(dir.get(), temp->c_str(), 0);
    return StorageError("write", file_path, err);
  }
  return OkStatus();
}

Result<std::string> MoveToTrash(int user_fd, const std::string& name, const std::string& path) {
  auto trash = RandomName(kTrashPrefix);
  if (!trash.ok()) return trash.error();
  if (renameat(user_fd, name.c_str(), user_fd, trash->c_str()) != 0) {
    return StorageError("renameat", path + "/" + name, LastErrno());
  }
  return trash;
}

Result<std::string> RandomName(const std::string& prefix) { return prefix + util::RandomHex(8); }

}  // namespace sandrun::storage
