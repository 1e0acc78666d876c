// What thaws a dead daemon's frozen sandboxes (cgroup v1). A kernel is frozen between cells
// (RunCgroup::Freeze); on v1 a frozen process takes no signal, not even SIGKILL, until it is
// thawed. A daemon killed (SIGKILL, a crash) with kernels frozen left them alive: their init
// neither took its parent-death SIGKILL nor saw its lifeline hang up, until the next daemon's
// start swept them (CgroupManager::SweepStale). The watch outlives the daemon by a moment:
// it thaws them, and each sandbox then ends by its own lifeline.
#pragma once

#include <sys/types.h>

#include <string>

#include "util/result.h"

namespace sandrun::sandbox {

// sandrun-init's command line flag for the watch, and the fd its pipe end is given as.
inline constexpr char kThawWatchFlag[] = "--thaw-when-gone";
inline constexpr int kThawWatchFd = 3;

// Starts `init_path --thaw-when-gone DIR` (sandrun-init, a small static process in a session
// of its own, so that a signal to the daemon's process group does not end it first) with the
// read end of a pipe whose write end only this process holds (close-on-exec, never closed:
// it goes with the process, however it ends). Returns its pid; 0 when there is nothing to
// watch (`freezer_dir` "": v2, where a frozen process dies of SIGKILL). What it cannot cover:
// a SIGKILL to the whole unit (systemd's last resort) takes it with the daemon. Call once, at
// the daemon's start. Errors: kSystem (the daemon serves on without it).
Result<pid_t> StartThawWatch(const std::string& init_path, const std::string& freezer_dir);

// sandrun-init's side: waits for the hang-up of kThawWatchFd, then ThawAll(freezer_dir), exits.
[[noreturn]] void ThawWhenGone(const std::string& freezer_dir);

// Thaws every cgroup directly below `freezer_dir` (freezer.state THAWED).
void ThawAll(const std::string& freezer_dir);

}  // namespace sandrun::sandbox
