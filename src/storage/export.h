// Export walk: find the files a run generated in its workspace (DESIGN.md §4).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "util/result.h"

namespace sandrun::storage {

struct ExportOptions {
  int max_files = 100;                    // files past this count are skipped as "too_many"
  uint64_t max_file_bytes = 10ull << 20;  // larger files are skipped as "too_large"
  // Workspace-relative directory prefixes never exported nor counted (".cache/", ...).
  std::vector<std::string> ignored_dirs = {".cache", ".local",      ".config",
                                           ".npm",   "__pycache__", ".ipynb_checkpoints"};
  // Workspace-relative directories that are not the user's (the launcher's program files):
  // neither exported, counted nor listed in `skipped`.
  std::vector<std::string> unlisted_dirs = {".sandrun"};
  // Input files (workspace-relative path -> sha256 hex) left unchanged are not exported again.
  std::vector<std::pair<std::string, std::string>> unchanged_inputs;
};

struct FoundFile {
  std::string path;   // workspace-relative, '/'-separated, no leading "./"
  uint64_t size = 0;  // bytes
};

struct SkippedFile {
  std::string path;
  std::string reason;  // "symlink", "not_regular", "too_large", "too_many", "quota", "ignored"
};

struct WalkResult {
  std::vector<FoundFile> files;  // in a stable (sorted) order
  std::vector<SkippedFile> skipped;
  bool limit_hit = false;  // some file skipped as too_large or too_many
};

// Walks the directory `workspace` without following any symlink (openat + O_NOFOLLOW |
// O_DIRECTORY at every level). Regular files are listed; symlinks, FIFOs, sockets and device
// nodes are skipped with a reason; ignored dirs are skipped whole (one "ignored" entry, their
// contents are not counted). Errors: cannot open `workspace`. Not safe after fork.
Result<WalkResult> WalkWorkspace(const std::string& workspace, const ExportOptions& options);

}  // namespace sandrun::storage
