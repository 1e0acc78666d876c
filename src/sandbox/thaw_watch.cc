#include "sandbox/thaw_watch.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include "sys/syscalls.h"
#include "sys/unique_fd.h"

namespace sandrun::sandbox {

Result<pid_t> StartThawWatch(const std::string& init_path, const std::string& freezer_dir) {
  if (freezer_dir.empty()) return 0;
  auto pipe = sys::MakePipe();
  if (!pipe.ok()) return pipe.error();
  auto pid = sys::Spawn({init_path, kThawWatchFlag, freezer_dir}, STDERR_FILENO, STDERR_FILENO,
                        pipe->read.get(), /*new_session=*/true);
  if (!pid.ok()) return pid.error();
  // Held until this process ends; every process it starts gets it closed (close-on-exec;
  // a sandbox's clone child closes every fd it was not given).
  (void)pipe->write.Release();
  return *pid;
}

void ThawAll(const std::string& freezer_dir) {
  DIR* dir = ::opendir(freezer_dir.c_str());
  if (dir == nullptr) return;
  while (struct dirent* e = ::readdir(dir)) {
    if (e->d_type != DT_DIR || e->d_name[0] == '.') continue;
    (void)sys::WriteFile(freezer_dir + "/" + e->d_name + "/freezer.state", "THAWED");
  }
  ::closedir(dir);
}

void ThawWhenGone(const std::string& freezer_dir) {
  // Only the daemon's end going away ends the wait: a stop signal to the whole unit
  // (systemd's KillMode=control-group) must not take the watch before the daemon.
  for (int sig : {SIGHUP, SIGINT, SIGQUIT, SIGTERM}) ::signal(sig, SIG_IGN);
  char byte;
  for (;;) {
    auto got = sys::Read(kThawWatchFd, &byte, 1);
    if (!got.ok() || *got == 0) break;
  }
  ThawAll(freezer_dir);
  ::_exit(0);
}

}  // namespace sandrun::sandbox
