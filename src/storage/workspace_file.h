// Files the daemon places into a run's workspace before the run: input files and blocks the
// run plan saves under a name (DESIGN.md §2 `files`, §5).
#pragma once

#include <sys/types.h>

#include <string>

#include "util/result.h"

namespace sandrun::storage {

// Writes `content` to the workspace-relative `path`, creating missing parent directories
// (0755) and never following a symlink on the way (each component opened with O_NOFOLLOW
// from the workspace's fd); the file (0644) and new directories are owned by uid:gid.
// Errors: kInvalidPath when `path` is not a plain relative path or a component
// cannot be made (e.g. an existing file stands there), kFileLimit when the workspace is
// full. Not safe after fork.
Status PlaceFile(const std::string& workspace, const std::string& path, const std::string& content,
                 uid_t uid, gid_t gid);

}  // namespace sandrun::storage
