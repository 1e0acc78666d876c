#include "sandbox/thaw_watch.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "sys/syscalls.h"
#include "sys/unique_fd.h"

namespace sandrun::sandbox {

Status StartThawWatch(const std::string& init_path, const std::string& freezer_dir) {
  if (freezer_dir.empty()) return OkStatus();
  auto pipe = sys::MakePipe();
  if (!pipe.ok()) return pipe.error();
  auto pid = sys::Spawn({init_path, "--thaw-when-gone", freezer_dir}, STDERR_FILENO, STDERR_FILENO,
                        pipe->read.get(), /*new_session=*/true);
  if (!pid.ok()) return pid.error();
  // Held until this process ends; every process it starts gets it closed (close-on-exec;
  // a sandbox's clone child closes every fd it was not given).
  (void)pipe->write.Release();
  return OkStatus();
}

void ThawAll(const std::string& freezer_dir) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(freezer_dir, error)) {
    if (entry.is_directory(error) && !entry.is_symlink(error)) {
      (void)sys::WriteFile(entry.path().string() + "/freezer.state", "THAWED");
    }
  }
}

void ThawWhenGone(int fd, const std::string& freezer_dir) {
  // Only the daemon's end going away ends the wait: a stop signal to the whole unit
  // (systemd's KillMode=control-group) must not take the watch before the daemon.
  for (int sig : {SIGHUP, SIGINT, SIGQUIT, SIGTERM}) ::signal(sig, SIG_IGN);
  char byte;
  for (;;) {
    auto got = sys::Read(fd, &byte, 1);
    if (!got.ok() || *got == 0) break;
  }
  ThawAll(freezer_dir);
  ::_exit(0);
}

}  // namespace sandrun::sandbox
