// Where the daemon's runs go. The sandbox's own ids
// (not root) build its mounts from paths below runs_dir, so every directory above it must be
// searchable by others. A state dir under /root (0700) is not: then runs go to
// /run/sandrun/<hash> unless runs_dir was set explicitly.
#pragma once

#include <string>

#include "config/config.h"
#include "util/result.h"

namespace sandrun::config {

struct RunsDirChoice {
  std::string path;       // the runs directory to use
  bool fallback = false;  // /run/sandrun/<hash>: removed again at a clean stop
  std::string note;       // why the fallback was taken ("" when not); for the log
};

// Looks at the disk (which directories on config.runs_dir exist and their modes), nothing
// more. Errors: code "config" when runs_dir was set explicitly and cannot be reached; the
// message names the key, the directory and the fix. Not safe after fork.
Result<RunsDirChoice> ChooseRunsDir(const Config& config);

}  // namespace sandrun::config
