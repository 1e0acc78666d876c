// What thaws a dead daemon's frozen sandboxes (cgroup v1). A kernel is frozen between cells
// (RunCgroup::Freeze); on v1 a frozen process takes no signal, not even SIGKILL, until it is
// thawed. A daemon killed (SIGKILL, a crash) with kernels frozen left them alive: their init
// neither took its parent-death SIGKILL nor saw its lifeline hang up, until the next daemon's
// start swept them (CgroupManager::SweepStale). The watch outlives the daemon by a moment:
// it thaws them, and each sandbox then ends by its own lifeline.
#pragma once

#include <string>

#include "util/result.h"

namespace sandrun::sandbox {

// Starts `init_path --thaw-when-gone DIR` (sandrun-init, a small static process in a session
// of its own, so that a signal to the daemon's process group does not end it first) with the
// read end of a pipe whose write end only this process holds (close-on-exec, never closed:
// it goes with the process, however it ends). Nothing to do when `freezer_dir` is "" (v2: a
// frozen process dies of SIGKILL). Call once, at the daemon's start. Errors: kSystem (the
// daemon serves on without it).
Status StartThawWatch(const std::string& init_path, const std::string& freezer_dir);

// sandrun-init's side: waits for the hang-up of fd `fd`, then ThawAll(freezer_dir), exits.
[[noreturn]] void ThawWhenGone(int fd, const std::string& freezer_dir);

// Thaws every cgroup directly below `freezer_dir` (freezer.state THAWED).
void ThawAll(const std::string& freezer_dir);

}  // namespace sandrun::sandbox
