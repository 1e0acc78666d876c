#include "storage/runs_dir.h"

#include <dirent.h>

#include "sys/syscalls.h"

namespace sandrun::storage {

int SweepRunsDir(const std::string& runs_dir) {
  int swept = 0;
  DIR* dir = ::opendir(runs_dir.c_str());
  if (dir == nullptr) return 0;
  while (struct dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::string run = runs_dir + "/" + e->d_name;
    (void)sys::Unmount(run + "/fs");
    if (sys::RemoveTree(run).ok()) ++swept;
  }
  ::closedir(dir);
  return swept;
}

Status RemoveFallbackRunsDir(const std::string& runs_dir) {
  if (Status s = sys::RemoveEmptyDir(runs_dir); !s.ok()) return s;
  (void)sys::RemoveEmptyDir(runs_dir.substr(0, runs_dir.rfind('/')));
  return OkStatus();
}

}  // namespace sandrun::storage
