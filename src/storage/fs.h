// File-system helpers for storage/: an owning fd, errno-carrying errors, fd-relative walks.
//
// The fd owner is sys::UniqueFd and the tree walker is sys/tree_walk.h; errno is read there
// (docs/STYLE.md), these are storage's names for them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sys/unique_fd.h"
#include "util/result.h"

namespace sandrun::storage {

// The fd owner of sys/ (docs/STYLE.md: fd owners live there).
using UniqueFd = sys::UniqueFd;

// An Error of kind kSystem whose message is "<call>(<arg>): <sys::ErrnoMessage(err)>".
Error StorageError(std::string_view call, std::string_view arg, int err);

// The current errno (read here so callers outside this file need not touch it).
int LastErrno();

// Splits a workspace-relative path on '/' (util::SplitRelativePath). Returns false (and
// leaves `out` unspecified) when the path breaks the one rule set of util/relative_path.h
// (empty, absolute, an empty, "." or ".." segment, a NUL byte, past PATH_MAX or NAME_MAX):
// such a path cannot have come from WalkWorkspace and must not be joined onto a directory.
bool SplitRelativePath(const std::string& path, std::vector<std::string>* out);

// Opens `name` in `dirfd` as a directory without following a symlink in its last component
// (O_NOFOLLOW | O_DIRECTORY). Returns an invalid fd and sets errno on failure.
UniqueFd OpenDirAt(int dirfd, const std::string& name);

// Why opening `name` in `dirfd` with O_NOFOLLOW failed with `err`, as a files_skipped reason:
// "symlink" when it is (now) a symlink, else "not_regular" (gone, replaced, unreadable).
// O_NOFOLLOW | O_DIRECTORY on a symlink fails with ENOTDIR, not ELOOP, hence the lstat.
const char* SkipReasonForFailedOpen(int dirfd, const std::string& name, int err);

// sys::ListDir: the names in the directory `fd` (without "." and ".."), at most `max_names`
// of them; sets *truncated when more were present. Errors: the directory cannot be read.
Result<std::vector<std::string>> ListDir(int fd, size_t max_names, bool* truncated);

// Removes `name` (a file or a whole directory tree) from `dirfd` without following symlinks
// (sys::RemoveTreeAt). Best effort: keeps going past entries it cannot remove. Returns false
// if anything stayed.
bool RemoveTreeAt(int dirfd, const std::string& name);

}  // namespace sandrun::storage
