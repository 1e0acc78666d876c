// Bounds of the export walk, apart from ExportOptions (which are per-request limits): these
// protect the daemon from a hostile tree and are not something a request may change.
#pragma once

#include <cstddef>
#include <string>

#include "storage/export.h"
#include "util/result.h"

namespace sandrun::storage {

struct WalkLimits {
  // One fd is open per level while walking; 64 levels is far past any real output tree.
  int max_depth = 64;
  // Directory entries read in all (files, directories, anything), which bounds the walk's
  // time and memory. Entries past it are reported as skipped "too_many".
  size_t max_entries = 100000;
  // Bytes of the paths of files found, kept in memory until sorted; files past it are
  // skipped as "too_long", like those past ExportOptions::max_listed_path_bytes (far less).
  size_t max_found_path_bytes = 8 << 20;
  // Skipped entries kept in WalkResult::skipped, by number and by bytes of their paths; the
  // rest are only counted (skipped_unlisted).
  size_t max_skipped_listed = 1000;
  size_t max_skipped_path_bytes = 256 << 10;
};

// WalkWorkspace with explicit bounds (WalkWorkspace uses WalkLimits{}). For tests, which
// cannot afford to build a 100000-entry tree, and for callers that want tighter bounds.
Result<WalkResult> WalkWorkspaceWithLimits(const std::string& workspace,
                                           const ExportOptions& options, const WalkLimits& limits);

}  // namespace sandrun::storage
