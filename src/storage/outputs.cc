#include "storage/outputs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "storage/fs.h"

namespace sandrun::storage {
namespace {

Result<UniqueFd> OpenOutputsDir(const std::string& dir) {
  UniqueFd fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return StorageError("open", dir, LastErrno());
  return fd;
}

bool PlainName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

}  // namespace

Result<std::string> ReadOutputFile(const std::string& dir, const std::string& name,
                                   size_t max_bytes, bool* truncated) {
  *truncated = false;
  if (!PlainName(name))
    return MakeError(ErrorKind::kSystem, "ReadOutputFile: bad name '" + name + "'");
  auto dir_fd = OpenOutputsDir(dir);
  if (!dir_fd.ok()) return dir_fd.error();
  // O_NONBLOCK: a FIFO planted under the name must not block the daemon.
  UniqueFd fd(openat(dir_fd->get(), name.c_str(),
                     O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd.valid()) {
    const int err = LastErrno();
    if (err == ENOENT) return std::string();
    return StorageError("openat", dir + "/" + name, err);
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return StorageError("fstat", dir + "/" + name, LastErrno());
  if (!S_ISREG(st.st_mode)) {
    return MakeError(ErrorKind::kSystem, dir + "/" + name + ": not a regular file");
  }
  std::string data;
  char buffer[64 * 1024];
  while (data.size() <= max_bytes) {
    const ssize_t n = read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && LastErrno() == EINTR) continue;
    if (n < 0) return StorageError("read", dir + "/" + name, LastErrno());
    if (n == 0) break;
    data.append(buffer, static_cast<size_t>(n));
  }
  if (data.size() > max_bytes) {
    data.resize(max_bytes);
    *truncated = true;
  }
  return data;
}

Result<OutputScan> ScanOutputFiles(const std::string& dir, const std::vector<std::string>& names,
                                   uint64_t max_file_bytes) {
  auto dir_fd = OpenOutputsDir(dir);
  if (!dir_fd.ok()) return dir_fd.error();
  OutputScan scan;
  for (const std::string& name : names) {
    struct stat st;
    if (!PlainName(name) || fstatat(dir_fd->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      continue;
    }
    if (S_ISLNK(st.st_mode)) {
      scan.skipped.push_back({name, "symlink"});
    } else if (!S_ISREG(st.st_mode)) {
      scan.skipped.push_back({name, "not_regular"});
    } else if (static_cast<uint64_t>(st.st_size) > max_file_bytes) {
      scan.skipped.push_back({name, "too_large"});
    } else {
      scan.files.push_back({name, static_cast<uint64_t>(st.st_size),
                            static_cast<uint64_t>(st.st_blocks) * 512, StampOf(st)});
    }
  }
  return scan;
}

}  // namespace sandrun::storage
