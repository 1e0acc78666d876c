// The outputs area of a run: a directory outside the workspace where the program
// leaves the figures and images it showed (figure-1.png, ...) and its display manifest. The
// program wrote all of it, so nothing there is trusted: names are looked up one component at a
// time without following symlinks, and reads are bounded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "storage/export.h"
#include "util/result.h"

namespace sandrun::storage {

// Reads the regular file `name` (one path component) in `dir`, at most `max_bytes` of it
// (*truncated set when there was more). A missing file reads as "". Errors: `dir` cannot be
// opened; `name` is a symlink or not a regular file; a read error. Not safe after fork.
Result<std::string> ReadOutputFile(const std::string& dir, const std::string& name,
                                   size_t max_bytes, bool* truncated);

struct OutputScan {
  std::vector<FoundFile> files;  // path = the name, in the order asked
  std::vector<SkippedFile> skipped;
};

// Looks up each of `names` (plain names, one component, each once) in `dir` without following
// symlinks: regular files of at most `max_file_bytes` are listed; a missing name is left out;
// a symlink, another kind of file ("not_regular") or a larger file ("too_large") is skipped
// with that reason. Errors: `dir` cannot be opened. Not safe after fork.
Result<OutputScan> ScanOutputFiles(const std::string& dir, const std::vector<std::string>& names,
                                   uint64_t max_file_bytes);

}  // namespace sandrun::storage
