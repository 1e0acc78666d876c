// The runs directory between daemons: what a crashed (or hung) daemon left there, and the
// fallback directory of a cleanly stopped one (config/runs_dir.h).
#pragma once

#include <string>

#include "util/result.h"

namespace sandrun::storage {

// Removes every run in `runs_dir` (not hidden entries): its workspace mount (`<run>/fs`,
// detached) and its directory. Returns how many runs went; a missing directory is 0.
// Only at start-up and at stop: runs in flight would lose their workspaces. Not safe after
// fork.
int SweepRunsDir(const std::string& runs_dir);

// Removes the fallback runs directory (/run/sandrun/<hash>) and /run/sandrun itself when
// empty: nothing of a cleanly stopped daemon stays in /run. Another daemon's directory keeps
// /run/sandrun (that rmdir fails with ENOTEMPTY, which is fine). Errors: `runs_dir` cannot
// be removed (sys::RemoveEmptyDir's, naming the path).
Status RemoveFallbackRunsDir(const std::string& runs_dir);

}  // namespace sandrun::storage
