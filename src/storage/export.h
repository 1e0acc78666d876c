// Export walk: find the files a run generated in its workspace (DESIGN.md §4).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "util/reserved_dirs.h"
#include "util/result.h"

namespace sandrun::storage {

// One state of a file, read with stat(2) only. A run that writes a file, even the same bytes,
// truncates, chmods, hard-links or replaces it changes its stamp: every such change moves the
// inode's ctime to the current time, and no program can set ctime (utimensat sets mtime and
// atime, and moves ctime too); a file replaced by another has a new inode. mtime is in the
// stamp as well, though a program can set it: ctime alone already tells the change.
struct FileStamp {
  uint64_t ino = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};
FileStamp StampOf(const struct stat& st);
// path -> EncodeStamp(...): how the run handler, and a kernel between runs, keep the stamps
// of the files a run starts with (the same map type the session restore's digests use).
using FileStamps = std::map<std::string, std::string>;
// "ino size mtime_ns ctime_ns" in decimal, and back (nullopt when `text` is not that). Pure.
std::string EncodeStamp(const FileStamp& stamp);
std::optional<FileStamp> DecodeStamp(std::string_view text);

struct ExportOptions {
  int max_files = 100;                    // files past this count are skipped as "too_many"
  uint64_t max_file_bytes = 10ull << 20;  // larger files are skipped as "too_large"
  // Paths longer than this many bytes are skipped as "too_long" (PATH_MAX of limits.h): a
  // directory as one entry, its contents not looked at.
  size_t max_path_bytes = 4096;
  // The paths of the files found come to at most this many bytes; the files past it (in
  // sorted order) are skipped as "too_long". Each file listed in a response costs about five
  // times its path (path, name, percent-encoded URL), so this bounds the response.
  size_t max_listed_path_bytes = 256 << 10;
  // Workspace-relative directory prefixes never exported nor counted (".cache/", ...).
  // site-packages: what `pip install --target site-packages` or a venv installed, at
  // any depth like __pycache__.
  std::vector<std::string> ignored_dirs = {".cache",        ".local",       ".config",
                                           ".npm",          "__pycache__",  ".ipynb_checkpoints",
                                           "site-packages", "dist-packages"};
  // Workspace-relative directories that are not the user's (the launcher's program files):
  // neither exported, counted nor listed in `skipped`.
  std::vector<std::string> unlisted_dirs = {util::kProgramDir};
  // Files the run started with (workspace-relative path -> their FileStamp then): those whose
  // stamp is the same at export time were not touched by the run and are not exported again.
  std::map<std::string, FileStamp> untouched;
};

struct FoundFile {
  std::string path;            // workspace-relative, '/'-separated, no leading "./"
  uint64_t size = 0;           // bytes (st_size)
  uint64_t bytes_on_disk = 0;  // st_blocks * 512 (file_copy.h): what quotas count
  FileStamp stamp = {};        // as the walk found it
};

struct SkippedFile {
  std::string path;
  // "symlink", "not_regular", "too_large", "too_many", "too_deep", "too_long", "quota",
  // "ignored"
  std::string reason;
};

struct WalkResult {
  std::vector<FoundFile> files;  // in a stable (sorted) order
  // The first skipped entries (WalkLimits bounds their number and path bytes) ...
  std::vector<SkippedFile> skipped;
  uint64_t skipped_unlisted = 0;  // ... and how many more were skipped
  bool limit_hit = false;         // some file skipped as too_large, too_many, too_deep or too_long
};

// Walks the directory `workspace` without following any symlink (openat + O_NOFOLLOW |
// O_DIRECTORY at every level). Regular files are listed; symlinks, FIFOs, sockets and device
// nodes are skipped with a reason; ignored dirs are skipped whole (one "ignored" entry, their
// contents are not counted; none when they hold only empty directories, found within 8 levels
// and 64 names); a directory past WalkLimits::max_depth is skipped whole as
// "too_deep"; paths past the ExportOptions byte bounds as "too_long". Memory is bounded by
// WalkLimits whatever the tree. Errors: cannot open `workspace`. Not safe after fork.
Result<WalkResult> WalkWorkspace(const std::string& workspace, const ExportOptions& options);

// The stamps of the regular files a walk with `options` would find in `workspace` (whatever
// their number or size; WalkLimits still bounds the work), keyed by path: what the run starts
// with, for ExportOptions::untouched. Errors: cannot open `workspace`. Not safe after fork.
Result<std::map<std::string, FileStamp>> StampWorkspace(const std::string& workspace,
                                                        const ExportOptions& options);

// Returns once the clock file timestamps come from has moved past `latest_ns` (at most a
// clock tick, a few ms; bounded at 100 ms): a write after that cannot give a file the ctime
// it had at `latest_ns`, even on a kernel whose file times have a tick's granularity.
void WaitPastTimestamp(int64_t latest_ns);

}  // namespace sandrun::storage
