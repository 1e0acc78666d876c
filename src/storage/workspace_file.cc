#include "storage/workspace_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "storage/fs.h"
#include "sys/syscalls.h"

namespace sandrun::storage {

Status PlaceFile(const std::string& workspace, const std::string& path, const std::string& content,
                 uid_t uid, gid_t gid) {
  std::vector<std::string> parts;
  if (!SplitRelativePath(path, &parts)) {
    return MakeError(ErrorKind::kInvalidPath, "not a plain relative path: " + path);
  }
  UniqueFd dir(::open(workspace.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  for (size_t i = 0; dir.valid() && i + 1 < parts.size(); ++i) {
    if (::mkdirat(dir.get(), parts[i].c_str(), 0755) == 0) {
      UniqueFd made = OpenDirAt(dir.get(), parts[i]);
      if (made.valid()) (void)::fchown(made.get(), uid, gid);
    }
    dir = OpenDirAt(dir.get(), parts[i]);
  }
  if (!dir.valid()) {
    return MakeError(ErrorKind::kInvalidPath, "cannot create the directories of " + path,
                     LastErrno());
  }
  UniqueFd fd(::openat(dir.get(), parts.back().c_str(),
                       O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd.valid()) return MakeError(ErrorKind::kInvalidPath, "cannot create " + path, LastErrno());
  if (!sys::WriteAll(fd.get(), content.data(), content.size())) {
    return MakeError(ErrorKind::kFileLimit, "cannot write " + path + " (the workspace is full?)",
                     LastErrno());
  }
  (void)::fchown(fd.get(), uid, gid);
  return OkStatus();
}

}  // namespace sandrun::storage
