// The one validator of workspace-relative paths, pure. Every path joined
// onto a directory by the daemon passes it: input files of a request (api/run_codec.cc, with
// the request's own tighter bounds on top), files placed in or published from a workspace
// (storage/fs.cc SplitRelativePath), blocks saved by a Markdown plan (markdown/text_util.cc,
// with a narrower alphabet on top).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace sandrun::util {

// PATH_MAX and NAME_MAX of <limits.h>: what the kernel takes, and the export walk's bound on a
// path it lists (storage/export.h max_path_bytes).
inline constexpr size_t kMaxRelativePathBytes = 4096;
inline constexpr size_t kMaxPathNameBytes = 255;

// The rule set, checked in this order; returns why `path` breaks it, or "" when it is a plain
// relative path:
//   "is empty"
//   "is longer than 4096 bytes"
//   "must be relative to the workspace (no leading '/')"
//   "has an empty segment ('//' or a trailing '/')"
//   "must not contain '.' or '..' segments"
//   "has a name longer than 255 bytes"
//   "contains a NUL byte"
// A path passing it names a file at or below the directory it is joined onto (no segment
// leaves it), as long as no segment is a symlink, which openat(O_NOFOLLOW) sees to.
std::string RelativePathError(std::string_view path);

// RelativePathError(path).empty(), and then the segments of `path` in *out (else `out` is
// left unspecified).
bool SplitRelativePath(std::string_view path, std::vector<std::string>* out);

}  // namespace sandrun::util
