#include "storage/fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <system_error>

namespace sandrun::storage {

Error StorageError(std::string_view call, std::string_view arg, int err) {
  // std::error_code's message is thread-safe, unlike strerror(3).
  std::string message(call);
  message += "(";
  message += arg;
  message += "): ";
  message += std::error_code(err, std::generic_category()).message();
  return MakeError("storage", std::move(message), err);
}

int LastErrno() { return errno; }

bool SplitRelativePath(const std::string& path, std::vector<std::string>* out) {
  out->clear();
  if (path.empty() || path.find('\0') != std::string::npos) return false;
  size_t start = 0;
  while (true) {
    const size_t slash = path.find('/', start);
    const size_t end = slash == std::string::npos ? path.size() : slash;
    std::string segment = path.substr(start, end - start);
    if (segment.empty() || segment == "." || segment == "..") return false;
    out->push_back(std::move(segment));
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
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

namespace {

struct DirCloser {
  void operator()(DIR* dir) const { closedir(dir); }
};

}  // namespace

Result<std::vector<std::string>> ListDir(int fd, size_t max_names, bool* truncated) {
  *truncated = false;
  // fdopendir takes the fd it is given; hand it a duplicate so the caller keeps `fd` for the
  // *at() calls on the entries.
  const int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return StorageError("fcntl", "F_DUPFD_CLOEXEC", errno);
  std::unique_ptr<DIR, DirCloser> dir(fdopendir(dup_fd));
  if (!dir) {
    const int err = errno;
    close(dup_fd);
    return StorageError("fdopendir", std::to_string(fd), err);
  }
  rewinddir(dir.get());
  std::vector<std::string> names;
  while (true) {
    errno = 0;
    const dirent* entry = readdir(dir.get());
    if (entry == nullptr) {
      if (errno != 0) return StorageError("readdir", std::to_string(fd), errno);
      return names;
    }
    const std::string_view name(entry->d_name);
    if (name == "." || name == "..") continue;
    if (names.size() >= max_names) {
      *truncated = true;
      return names;
    }
    names.emplace_back(name);
  }
}

bool RemoveTreeAt(int dirfd, const std::string& name) {
  struct stat st;
  if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT;
  if (!S_ISDIR(st.st_mode)) return unlinkat(dirfd, name.c_str(), 0) == 0 || errno == ENOENT;
  bool all_removed = true;
  {
    UniqueFd fd = OpenDirAt(dirfd, name);
    if (!fd.valid()) return false;
    bool truncated = false;
    // The trees removed here are the store's own (bounded depth and size); no cap is needed
    // beyond what fits in memory.
    auto names = ListDir(fd.get(), SIZE_MAX, &truncated);
    if (!names.ok()) return false;
    for (const std::string& child : *names) all_removed &= RemoveTreeAt(fd.get(), child);
  }
  return unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) == 0 && all_removed;
}

}  // namespace sandrun::storage
