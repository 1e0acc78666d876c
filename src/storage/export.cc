#include "storage/export.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>

#include "storage/file_copy.h"
#include "storage/fs.h"
#include "storage/walk_limits.h"
#include "sys/tree_walk.h"

namespace sandrun::storage {
namespace {

// What lies past WalkLimits is reported as skipped and sets limit_hit, like files past
// max_files: "too_deep" past max_depth, "too_many" past the number of entries, "too_long" past
// the path byte bounds.
//
// The walk is not a client of sys/tree_walk.h, whose policy is to stop at the first limit
// (which suits HoldsOnlyEmptyDirs below, a yes/no on a small tree): the export
// skips what is past a limit and goes on (a too-deep directory costs its own subtree, not its
// siblings), and which files a response lists is part of the API. The tree walker was modelled
// on this one (fd-relative, names read no further than the budget left, sorted).

// True when the directory `name` in `dirfd` holds nothing but empty directories, found within
// 8 levels (the directory's own entries and 7 below) and 64 entries; past either, false.
bool HoldsOnlyEmptyDirs(int dirfd, const std::string& name) {
  const sys::TreeReport tree = sys::MeasureTreeAt(dirfd, name, sys::TreeLimits{7, 64});
  return tree.complete() && tree.unreadable == 0 && tree.entries == tree.dirs;
}

std::string Join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "/" + name;
}

class Walker {
 public:
  Walker(const ExportOptions& options, const WalkLimits& limits)
      : options_(options), limits_(limits) {
    for (std::string dir : options.ignored_dirs) {
      while (!dir.empty() && dir.back() == '/') dir.pop_back();
      if (!dir.empty()) ignored_.push_back(std::move(dir));
    }
  }

  void WalkDir(int fd, const std::string& prefix, int depth);
  WalkResult Finish();

 private:
  void Visit(int dirfd, const std::string& prefix, const std::string& name, int depth);
  void VisitDir(int dirfd, const std::string& name, const std::string& path, int depth);
  void VisitFile(int dirfd, const std::string& name, const std::string& path,
                 const struct stat& st);
  bool IsIgnored(const std::string& path, const std::string& name) const;
  bool IsUntouched(const std::string& path, const FileStamp& stamp) const {
    const auto it = options_.untouched.find(path);
    return it != options_.untouched.end() && it->second == stamp;
  }
  void Skip(const std::string& path, const char* reason) {
    // Bounded: a tree of 100000 long paths must not cost the daemon gigabytes.
    if (result_.skipped.size() < limits_.max_skipped_listed &&
        skipped_bytes_ + path.size() <= limits_.max_skipped_path_bytes) {
      skipped_bytes_ += path.size();
      result_.skipped.push_back({path, reason});
    } else {
      ++result_.skipped_unlisted;
    }
  }
  void SkipLimit(const std::string& path, const char* reason) {
    Skip(path, reason);
    result_.limit_hit = true;
  }

  const ExportOptions& options_;
  const WalkLimits& limits_;
  std::vector<std::string> ignored_;
  std::vector<FoundFile> candidates_;  // regular files within max_file_bytes, any order
  WalkResult result_;
  size_t listed_ = 0;         // directory entries read so far, at most limits_.max_entries
  size_t found_bytes_ = 0;    // path bytes in candidates_
  size_t skipped_bytes_ = 0;  // path bytes in result_.skipped
};

void Walker::WalkDir(int fd, const std::string& prefix, int depth) {
  const std::string dir_path = prefix.empty() ? "." : prefix;
  bool truncated = false;
  // The budget counts names listed, not visited: every listed name stays in memory until its
  // turn, so this is what bounds memory (and, since each listed directory is opened at most
  // once, the work) however the tree is shaped.
  auto names = ListDir(fd, limits_.max_entries - listed_, &truncated);
  if (!names.ok()) {
    // An unreadable directory exports nothing; say so rather than fail the whole run.
    Skip(dir_path, "not_regular");
    return;
  }
  listed_ += names->size();
  if (truncated) {
    // The rest of this directory was never read; which names made it in depends on readdir
    // order, which is fine for a tree no real program writes.
    SkipLimit(dir_path, "too_many");
  }
  std::sort(names->begin(), names->end());
  for (const std::string& name : *names) Visit(fd, prefix, name, depth);
}

void Walker::Visit(int dirfd, const std::string& prefix, const std::string& name, int depth) {
  const std::string path = Join(prefix, name);
  struct stat st;
  // AT_SYMLINK_NOFOLLOW: stat the link itself; never open anything before its type is known
  // (opening a FIFO would block the walk).
  if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return;  // vanished
  if (path.size() > options_.max_path_bytes) {
    SkipLimit(path, "too_long");  // a directory: its contents are longer still
  } else if (S_ISLNK(st.st_mode)) {
    Skip(path, "symlink");
  } else if (S_ISDIR(st.st_mode)) {
    VisitDir(dirfd, name, path, depth);
  } else if (S_ISREG(st.st_mode)) {
    VisitFile(dirfd, name, path, st);
  } else {
    Skip(path, "not_regular");  // FIFO, socket, character or block device
  }
}

void Walker::VisitDir(int dirfd, const std::string& name, const std::string& path, int depth) {
  for (const std::string& dir : options_.unlisted_dirs) {
    if (dir == path) return;
  }
  if (IsIgnored(path, name)) {
    // One entry for the whole directory; its contents are not counted. A tree of empty
    // directories has nothing to tell (the kernel makes an empty ~/.local/lib/.../site-packages
    // for pip: it was listed in every answer of the session).
    if (!HoldsOnlyEmptyDirs(dirfd, name)) Skip(path, "ignored");
    return;
  }
  if (depth + 1 > limits_.max_depth) {
    SkipLimit(path, "too_deep");
    return;
  }
  UniqueFd fd = OpenDirAt(dirfd, name);
  if (!fd.valid()) {
    // Swapped for a symlink since fstatat, or unreadable, or gone: nothing to export from it.
    Skip(path, SkipReasonForFailedOpen(dirfd, name, LastErrno()));
    return;
  }
  WalkDir(fd.get(), path, depth + 1);
}

void Walker::VisitFile(int dirfd, const std::string& name, const std::string& path,
                       const struct stat& st) {
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  // Files the run did not touch are left out silently, not listed as skipped: the caller gave
  // them to us (request files, or a session's earlier outputs), so listing them on every run
  // would bury what is actually news about this run.
  const FileStamp stamp = StampOf(st);
  if (IsUntouched(path, stamp)) return;
  if (size > options_.max_file_bytes) {
    SkipLimit(path, "too_large");
    return;
  }
  if (found_bytes_ + path.size() > limits_.max_found_path_bytes) {
    // Past the listed-path budget in any case: kept out of memory as well as the response.
    SkipLimit(path, "too_long");
    return;
  }
  found_bytes_ += path.size();
  candidates_.push_back({path, size, BytesOnDisk(st), stamp});
}

bool Walker::IsIgnored(const std::string& path, const std::string& name) const {
  // An entry matches its exact workspace-relative path ("data/tmp") or, for single-component
  // entries, that name anywhere in the tree (__pycache__ appears at every level).
  for (const std::string& dir : ignored_) {
    if (dir == path) return true;
    if (dir == name && dir.find('/') == std::string::npos) return true;
  }
  return false;
}

WalkResult Walker::Finish() {
  // max_files applies in sorted path order, so the same tree always exports the same files.
  std::sort(candidates_.begin(), candidates_.end(),
            [](const FoundFile& a, const FoundFile& b) { return a.path < b.path; });
  const size_t max_files = options_.max_files > 0 ? static_cast<size_t>(options_.max_files) : 0;
  size_t listed_bytes = 0;
  bool over_bytes = false;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    over_bytes =
        over_bytes || listed_bytes + candidates_[i].path.size() > options_.max_listed_path_bytes;
    if (i >= max_files) {
      SkipLimit(candidates_[i].path, "too_many");
    } else if (over_bytes) {
      SkipLimit(candidates_[i].path, "too_long");
    } else {
      listed_bytes += candidates_[i].path.size();
      result_.files.push_back(std::move(candidates_[i]));
    }
  }
  std::stable_sort(result_.skipped.begin(), result_.skipped.end(),
                   [](const SkippedFile& a, const SkippedFile& b) { return a.path < b.path; });
  return std::move(result_);
}

}  // namespace

FileStamp StampOf(const struct stat& st) {
  constexpr int64_t kNs = 1000000000;
  return {static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_size),
          static_cast<int64_t>(st.st_mtim.tv_sec) * kNs + st.st_mtim.tv_nsec,
          static_cast<int64_t>(st.st_ctim.tv_sec) * kNs + st.st_ctim.tv_nsec};
}

std::string EncodeStamp(const FileStamp& s) {
  return std::to_string(s.ino) + " " + std::to_string(s.size) + " " + std::to_string(s.mtime_ns) +
         " " + std::to_string(s.ctime_ns);
}

std::optional<FileStamp> DecodeStamp(std::string_view text) {
  FileStamp s;
  const char* p = text.data();
  const char* end = text.data() + text.size();
  auto field = [&](auto* value, bool last) {
    auto [next, ec] = std::from_chars(p, end, *value);
    if (ec != std::errc() || next == p) return false;
    p = next;
    if (last) return p == end;
    if (p == end || *p != ' ') return false;
    ++p;
    return true;
  };
  if (field(&s.ino, false) && field(&s.size, false) && field(&s.mtime_ns, false) &&
      field(&s.ctime_ns, true)) {
    return s;
  }
  return std::nullopt;
}

Result<std::map<std::string, FileStamp>> StampWorkspace(const std::string& workspace,
                                                        const ExportOptions& options) {
  ExportOptions every = options;
  every.max_files = std::numeric_limits<int>::max();
  every.max_file_bytes = std::numeric_limits<uint64_t>::max();
  every.max_listed_path_bytes = std::numeric_limits<size_t>::max();
  every.untouched.clear();
  auto walk = WalkWorkspace(workspace, every);
  if (!walk.ok()) return walk.error();
  std::map<std::string, FileStamp> stamps;
  for (const FoundFile& f : walk->files) stamps.emplace(f.path, f.stamp);
  return stamps;
}

void WaitPastTimestamp(int64_t latest_ns) {
  for (int waited_ms = 0; waited_ms < 100; ++waited_ms) {
    struct timespec now;
    // File times come from the coarse clock (a tick's granularity) on kernels without
    // fine-grained timestamps; on those with them this returns at once.
    ::clock_gettime(CLOCK_REALTIME_COARSE, &now);
    if (static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec > latest_ns) return;
    const struct timespec ms = {0, 1000000};
    ::nanosleep(&ms, nullptr);
  }
}

Result<WalkResult> WalkWorkspace(const std::string& workspace, const ExportOptions& options) {
  return WalkWorkspaceWithLimits(workspace, options, WalkLimits{});
}

Result<WalkResult> WalkWorkspaceWithLimits(const std::string& workspace,
                                           const ExportOptions& options, const WalkLimits& limits) {
  // The workspace path itself is the daemon's own and is opened as given; O_NOFOLLOW applies
  // from its entries down, which is all the sandboxed program could have changed.
  UniqueFd root(open(workspace.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) return StorageError("open", workspace, LastErrno());
  Walker walker(options, limits);
  walker.WalkDir(root.get(), "", 0);
  return walker.Finish();
}

}  // namespace sandrun::storage
