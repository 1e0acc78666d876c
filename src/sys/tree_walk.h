// The one bounded, fd-relative directory tree walker. Measuring, removing
// and copying trees are visitors of WalkTree; the export walk (storage/export.cc) is the
// reference implementation it was modelled on and keeps its own skip-and-continue policy.
//
// Every directory is opened with openat(O_NOFOLLOW | O_DIRECTORY) relative to its parent's
// fd and every entry is looked at with fstatat(AT_SYMLINK_NOFOLLOW): a symlink is seen as
// itself and never followed, whatever the sandboxed program swapped in.
//
// One limit policy: the walk stops at the first limit it reaches, and says which one and
// where in TreeReport. It never silently truncates; what a caller does with an incomplete
// walk (fail, log, treat the count as a lower bound) is the caller's decision.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace sandrun::sys {

struct TreeLimits {
  // Directories are entered down to this depth (the root's own entries are at depth 0; a
  // directory at depth max_depth is visited but not entered). One fd is open per level.
  int max_depth = 64;
  // Entries visited in all (files, directories, anything). Names are read no further than
  // the budget left, so this bounds memory and time whatever the shape of the tree.
  uint64_t max_entries = 100000;
  // Bytes on disk (st_blocks * 512) of the regular files visited.
  uint64_t max_bytes = UINT64_MAX;
};

// No limit at all but the depth (trees we must remove whatever their size).
constexpr TreeLimits kUnboundedTree{4096, UINT64_MAX, UINT64_MAX};

enum class TreeStop {
  kNone,      // walked whole
  kDepth,     // a directory deeper than max_depth
  kEntries,   // more than max_entries entries
  kBytes,     // more than max_bytes bytes on disk
  kVisitor,   // a visitor callback returned kStop
  kRootOpen,  // the root could not be opened or read
};
// "depth", "entries", "bytes", "visitor", "root"; "" for kNone.
const char* TreeStopName(TreeStop stop);

struct TreeEntry {
  int dirfd;                // the open directory holding the entry
  const std::string& name;  // its name in dirfd
  const std::string& path;  // relative to the root, '/'-separated, no leading "./"
  const struct stat& st;    // fstatat(AT_SYMLINK_NOFOLLOW)
  int depth;                // 0 for the root's own entries
};

enum class TreeStep {
  kDescend,  // go on (and, for a directory, enter it)
  kSkip,     // go on, but do not enter this directory
  kStop,     // end the walk (reported as TreeStop::kVisitor)
};

class TreeVisitor {
 public:
  virtual ~TreeVisitor() = default;
  // Every entry, in sorted name order within a directory, before a directory's contents.
  // The limits are checked first: an entry past max_entries or max_bytes is not shown.
  virtual TreeStep Enter(const TreeEntry& entry) = 0;
  // A directory after its contents were walked whole (not after a stop), `fd` open on it.
  virtual TreeStep Leave(const TreeEntry& entry, int fd) {
    (void)entry, (void)fd;
    return TreeStep::kDescend;
  }
  // A directory that Enter chose to enter could not be opened or read (`err`: errno).
  // Its contents are skipped and Leave is not called; the walk goes on.
  virtual void Unreadable(const TreeEntry& entry, int err) { (void)entry, (void)err; }
};

struct TreeReport {
  uint64_t entries = 0;        // entries shown to Enter
  uint64_t files = 0;          // of which regular files
  uint64_t dirs = 0;           // of which directories
  uint64_t bytes = 0;          // st_size of the regular files
  uint64_t bytes_on_disk = 0;  // st_blocks * 512 of the regular files: what quotas count
  uint64_t unreadable = 0;     // directories that could not be opened or read
  TreeStop stop = TreeStop::kNone;
  std::string stopped_at;  // the path at which it stopped ("." for the root)
  int err = 0;             // errno for kRootOpen

  bool complete() const { return stop == TreeStop::kNone; }
  // "stopped at <path>: more than N <limit>" or "" when complete; for logs and errors.
  std::string Describe(const TreeLimits& limits) const;
};

// Walks the tree below the open directory `root_fd` (not closed; its offset is reset),
// calling `visitor` for each entry. The root itself is not shown to the visitor.
// Not safe after fork (allocates).
TreeReport WalkTree(int root_fd, const TreeLimits& limits, TreeVisitor& visitor);

// Opens `path` as a directory (O_NOFOLLOW applies to its last component) and walks it.
// A missing or unopenable root is reported as kRootOpen with its errno.
TreeReport WalkTreeAt(int dirfd, const std::string& path, const TreeLimits& limits,
                      TreeVisitor& visitor);

// The walk alone, entering every directory: what WalkTree reports of a tree (its entries and
// bytes) without doing anything to it.
TreeReport MeasureTree(int root_fd, const TreeLimits& limits);
// The same of the directory `path` in `dirfd` (O_NOFOLLOW applies to its last component).
TreeReport MeasureTreeAt(int dirfd, const std::string& path, const TreeLimits& limits);

// Removes `name` in `dirfd` (a file, or a directory and everything below it) without
// following symlinks; a directory on another file system (a mount) is refused, not entered.
// Goes on past entries it cannot remove, then fails naming the first. Bounded by
// kUnboundedTree's depth: a deeper tree stays and is an error. A missing `name` is not an
// error. Errors: kSystem, naming the call and the path. Not safe after fork.
Status RemoveTreeAt(int dirfd, const std::string& name);

// Reads the names in the directory `fd` (without "." and ".."), at most `max_names` of them;
// sets *truncated when more were present. Takes no ownership of `fd`; its offset is reset.
// Errors: the directory cannot be read (kSystem, naming the call).
Result<std::vector<std::string>> ListDir(int fd, size_t max_names, bool* truncated);

}  // namespace sandrun::sys
