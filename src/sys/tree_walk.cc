#include "sys/tree_walk.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "sys/syscalls.h"
#include "sys/unique_fd.h"

namespace sandrun::sys {
namespace {

Error ListError(const char* call, const std::string& arg, int err) {
  // Same shape as storage's StorageError.
  return MakeError(ErrorKind::kSystem, std::string(call) + "(" + arg + "): " + ErrnoMessage(err),
                   err);
}

struct DirCloser {
  void operator()(DIR* dir) const { closedir(dir); }
};

class Walk {
 public:
  Walk(const TreeLimits& limits, TreeVisitor& visitor) : limits_(limits), visitor_(visitor) {}

  // Walks the entries of the directory `fd` (at `prefix`, whose entries are at `depth`).
  // False when the walk stopped.
  bool WalkDir(int fd, const std::string& prefix, int depth);
  TreeReport Finish() { return std::move(report_); }
  int list_err() const { return list_err_; }
  TreeStop stop() const { return report_.stop; }
  void StopAt(TreeStop stop, const std::string& path, int err = 0) {
    report_.stop = stop;
    report_.stopped_at = path.empty() ? "." : path;
    report_.err = err;
  }

 private:
  bool VisitEntry(int dirfd, const std::string& name, const std::string& path, int depth);

  const TreeLimits& limits_;
  TreeVisitor& visitor_;
  TreeReport report_;
  int list_err_ = 0;  // errno of the last directory that could not be read
};

bool Walk::WalkDir(int fd, const std::string& prefix, int depth) {
  // No more names are read than could still be visited: a directory of a million empty
  // files costs neither their names in memory nor the time to look at them.
  const uint64_t left = limits_.max_entries - report_.entries;
  bool truncated = false;
  auto names = ListDir(fd, left > SIZE_MAX ? SIZE_MAX : static_cast<size_t>(left), &truncated);
  if (!names.ok()) {
    list_err_ = names.error().err;  // the caller reports (root) or counts (unreadable)
    return false;
  }
  if (truncated) {
    StopAt(TreeStop::kEntries, prefix);
    return false;
  }
  std::sort(names->begin(), names->end());
  for (const std::string& name : *names) {
    const std::string path = prefix.empty() ? name : prefix + "/" + name;
    if (!VisitEntry(fd, name, path, depth)) return false;
  }
  return true;
}

bool Walk::VisitEntry(int dirfd, const std::string& name, const std::string& path, int depth) {
  struct stat st;
  // Gone since the listing (the tree may be live): nothing to visit.
  if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return true;
  const bool is_file = S_ISREG(st.st_mode), is_dir = S_ISDIR(st.st_mode);
  const uint64_t on_disk = is_file ? static_cast<uint64_t>(st.st_blocks) * 512 : 0;
  if (report_.entries + 1 > limits_.max_entries) {
    StopAt(TreeStop::kEntries, path);
    return false;
  }
  if (on_disk > limits_.max_bytes - report_.bytes_on_disk) {
    StopAt(TreeStop::kBytes, path);
    return false;
  }
  report_.entries += 1;
  report_.files += is_file ? 1 : 0;
  report_.dirs += is_dir ? 1 : 0;
  report_.bytes += is_file ? static_cast<uint64_t>(st.st_size) : 0;
  report_.bytes_on_disk += on_disk;
  const TreeEntry entry{dirfd, name, path, st, depth};
  const TreeStep step = visitor_.Enter(entry);
  if (step == TreeStep::kStop) {
    StopAt(TreeStop::kVisitor, path);
    return false;
  }
  if (!is_dir || step == TreeStep::kSkip) return true;
  if (depth + 1 > limits_.max_depth) {
    StopAt(TreeStop::kDepth, path);
    return false;
  }
  UniqueFd fd(openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) {
    // Swapped for a symlink or a file since fstatat, unreadable, or gone.
    report_.unreadable += 1;
    visitor_.Unreadable(entry, errno);
    return true;
  }
  if (!WalkDir(fd.get(), path, depth + 1)) {
    if (report_.stop != TreeStop::kNone) return false;
    report_.unreadable += 1;
    visitor_.Unreadable(entry, list_err_);
    return true;
  }
  if (visitor_.Leave(entry, fd.get()) == TreeStep::kStop) {
    StopAt(TreeStop::kVisitor, path);
    return false;
  }
  return true;
}

class NullVisitor : public TreeVisitor {
 public:
  TreeStep Enter(const TreeEntry&) override { return TreeStep::kDescend; }
};

Error RemoveError(const std::string& what, int err) {
  return MakeError(ErrorKind::kSystem, what + ": " + ErrnoMessage(err), err);
}

// Post-order removal: files as they are met, each directory once its contents are gone.
class Remover : public TreeVisitor {
 public:
  Remover(dev_t dev, const std::string& shown) : dev_(dev), shown_(shown) {}

  TreeStep Enter(const TreeEntry& entry) override {
    if (S_ISDIR(entry.st.st_mode)) {
      if (entry.st.st_dev == dev_) return TreeStep::kDescend;
      Note(MakeError(ErrorKind::kSystem, Shown(entry) + ": is another mount, not removed"));
      return TreeStep::kSkip;
    }
    if (unlinkat(entry.dirfd, entry.name.c_str(), 0) != 0 && errno != ENOENT) {
      Note(RemoveError("unlink " + Shown(entry), errno));
    }
    return TreeStep::kDescend;
  }
  TreeStep Leave(const TreeEntry& entry, int) override {
    if (unlinkat(entry.dirfd, entry.name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
      Note(RemoveError("rmdir " + Shown(entry), errno));
    }
    return TreeStep::kDescend;
  }
  void Unreadable(const TreeEntry& entry, int err) override {
    Note(RemoveError("open " + Shown(entry), err));
  }
  const Status& status() const { return status_; }

 private:
  std::string Shown(const TreeEntry& entry) const { return shown_ + "/" + entry.path; }
  void Note(Error error) {
    if (status_.ok()) status_ = std::move(error);  // the first failure names the cause
  }

  const dev_t dev_;
  const std::string& shown_;
  Status status_ = OkStatus();
};

}  // namespace

TreeReport MeasureTree(int root_fd, const TreeLimits& limits) {
  NullVisitor visitor;
  return WalkTree(root_fd, limits, visitor);
}

TreeReport MeasureTreeAt(int dirfd, const std::string& path, const TreeLimits& limits) {
  NullVisitor visitor;
  return WalkTreeAt(dirfd, path, limits, visitor);
}

Status RemoveTreeAt(int dirfd, const std::string& name) {
  struct stat st;
  if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return OkStatus();
    return RemoveError("lstat " + name, errno);
  }
  if (!S_ISDIR(st.st_mode)) {
    if (unlinkat(dirfd, name.c_str(), 0) != 0 && errno != ENOENT) {
      return RemoveError("unlink " + name, errno);
    }
    return OkStatus();
  }
  Remover remover(st.st_dev, name);
  const TreeReport report = WalkTreeAt(dirfd, name, kUnboundedTree, remover);
  if (report.stop == TreeStop::kRootOpen) return RemoveError("open " + name, report.err);
  if (!report.complete()) {
    return MakeError(ErrorKind::kSystem,
                     name + ": " + report.Describe(kUnboundedTree) + ", not removed");
  }
  if (!remover.status().ok()) return remover.status();
  if (unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    return RemoveError("rmdir " + name, errno);
  }
  return OkStatus();
}

const char* TreeStopName(TreeStop stop) {
  switch (stop) {
    case TreeStop::kNone:
      return "";
    case TreeStop::kDepth:
      return "depth";
    case TreeStop::kEntries:
      return "entries";
    case TreeStop::kBytes:
      return "bytes";
    case TreeStop::kVisitor:
      return "visitor";
    case TreeStop::kRootOpen:
      return "root";
  }
  return "";
}

std::string TreeReport::Describe(const TreeLimits& limits) const {
  const std::string at = "stopped at " + stopped_at + ": ";
  switch (stop) {
    case TreeStop::kNone:
      return "";
    case TreeStop::kDepth:
      return at + "deeper than " + std::to_string(limits.max_depth) + " directories";
    case TreeStop::kEntries:
      return at + "more than " + std::to_string(limits.max_entries) + " files and directories";
    case TreeStop::kBytes:
      return at + "more than " + std::to_string(limits.max_bytes) + " bytes on disk";
    case TreeStop::kVisitor:
      return at + "stopped by the visitor";
    case TreeStop::kRootOpen:
      return at + "cannot open or read it: " + ErrnoMessage(err);
  }
  return "";
}

TreeReport WalkTree(int root_fd, const TreeLimits& limits, TreeVisitor& visitor) {
  Walk walk(limits, visitor);
  if (!walk.WalkDir(root_fd, "", 0)) {
    // Stopped at a limit, or the root could not be read.
    if (walk.stop() == TreeStop::kNone) walk.StopAt(TreeStop::kRootOpen, "", walk.list_err());
  }
  return walk.Finish();
}

TreeReport WalkTreeAt(int dirfd, const std::string& path, const TreeLimits& limits,
                      TreeVisitor& visitor) {
  UniqueFd root(openat(dirfd, path.c_str(), O_RDONLY | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) {
    TreeReport report;
    report.stop = TreeStop::kRootOpen;
    report.stopped_at = ".";
    report.err = errno;
    return report;
  }
  return WalkTree(root.get(), limits, visitor);
}

Result<std::vector<std::string>> ListDir(int fd, size_t max_names, bool* truncated) {
  *truncated = false;
  // fdopendir takes the fd it is given; hand it a duplicate so the caller keeps `fd` for the
  // *at() calls on the entries.
  const int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return ListError("fcntl", "F_DUPFD_CLOEXEC", errno);
  std::unique_ptr<DIR, DirCloser> dir(fdopendir(dup_fd));
  if (!dir) {
    const int err = errno;
    close(dup_fd);
    return ListError("fdopendir", std::to_string(fd), err);
  }
  rewinddir(dir.get());
  std::vector<std::string> names;
  while (true) {
    errno = 0;
    const dirent* entry = readdir(dir.get());
    if (entry == nullptr) {
      if (errno != 0) return ListError("readdir", std::to_string(fd), errno);
      return names;
    }
    const std::string_view name(entry->d_name);
    if (name == "." || name == "..") continue;
    if (names.size() >= max_names) {
      *truncated = true;
      return names;
    }
    names.emplace_back(name);
  }
}

}  // namespace sandrun::sys
