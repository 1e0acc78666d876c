#include "storage/fs.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>

#include "sys/syscalls.h"
#include "sys/tree_walk.h"
#include "util/relative_path.h"

namespace sandrun::storage {

Error StorageError(std::string_view call, std::string_view arg, int err) {
  std::string message(call);
  message += "(";
  message += arg;
  message += "): ";
  message += sys::ErrnoMessage(err);
  return MakeError(ErrorKind::kSystem, std::move(message), err);
}

int LastErrno() { return sys::LastErrno(); }

bool SplitRelativePath(const std::string& path, std::vector<std::string>* out) {
  return util::SplitRelativePath(path, out);
}

UniqueFd OpenDirAt(int dirfd, const std::string& name) {
  return UniqueFd(openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC));
}

const char* SkipReasonForFailedOpen(int dirfd, const std::string& name, int err) {
  if (err == ELOOP) return "symlink";
  struct stat st;
  if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
    return "symlink";
  }
  return "not_regular";
}

Result<std::vector<std::string>> ListDir(int fd, size_t max_names, bool* truncated) {
  return sys::ListDir(fd, max_names, truncated);
}

bool RemoveTreeAt(int dirfd, const std::string& name) {
  return sys::RemoveTreeAt(dirfd, name).ok();
}

}  // namespace sandrun::storage
