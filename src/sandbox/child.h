// The child side of the sandbox: everything here runs in the clone(2)d child of a
// multi-threaded daemon, so it only makes async-signal-safe calls on data prepared by the
// parent before clone (no allocation, no locks, no logging, no exceptions).
#pragma once

#include <linux/filter.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <cstddef>

namespace sandrun::sandbox {

// One step of building a root: the root template on the host once (root_template.h), then the
// run's own mounts on it in each child.
enum class MountOp {
  kMkdir,        // mkdir(target, 0755)
  kSymlink,      // symlink(source, target)
  kFile,         // create target with `data` as content
  kTmpfs,        // mount a tmpfs named `source` ("tmpfs" when empty) on target, `data`, flags
  kBind,         // bind source on target (recursive), then remount with flags (+MS_RDONLY?)
  kBindOnly,     // bind source on target (recursive), no remount: it keeps the source's flags
  kProc,         // mount a fresh proc (the new pid namespace's) on target
  kMakePrivate,  // mount(target, MS_REC | MS_PRIVATE): nothing propagates to or from it
  kReadOnly,     // remount the file system on target read-only (its superblock) with flags
};

struct MountStep {
  MountOp op;
  const char* source;
  const char* target;
  unsigned long flags;  // mount flags (for kBind: the remount flags)
  const char* data;
  size_t data_size;
};

// Where a setup step failed; the child writes it to the report pipe.
enum class ChildStep : int {
  kNone = 0,
  kSync,
  kCgroupNamespace,
  kMountPrivate,
  kMountStep,  // index in `ChildReport::detail`
  kPivotRoot,
  kHostname,
  kFork,
  kSetGroups,
  kSetGid,
  kSetUid,
  kCapabilities,
  kNoNewPrivs,
  kRlimit,
  kChdir,
  kSeccomp,
  kExec,
  kExecInit,     // execveat of sandrun-init
  kInitPlan,     // init could not read its plan
  kUserSysctl,   // /proc/sys/user/<name> (index in detail)
  kOomScoreAdj,  // /proc/self/oom_score_adj of the program
  kSignalfd,
};
const char* ChildStepName(ChildStep step);

// Fixed-size record written atomically (< PIPE_BUF) to the report pipe.
struct ChildReport {
  enum Kind : int { kSetupFailed = 1, kProgramExited = 2 } kind;
  ChildStep step;
  int detail;       // mount step index, or rlimit resource
  int err;          // errno of the failed call
  int wait_status;  // for kProgramExited
};

// Everything the child needs, prepared by the parent. The child shares the parent's memory
// (CLONE_VM, launcher.cc CloneChild) until its execveat of sandrun-init: the parent keeps
// the plan, what it points to and the child's stack alive and unchanged until then (it waits
// for exec_notify_fd's EOF). What the program needs (argv, ids, rlimits, seccomp) is not
// here: it is in the InitPlan memfd that sandrun-init reads (init_plan.h).
struct ChildPlan {
  // File descriptors in the parent's numbering; the child rearranges them (init_plan.h).
  int stdin_fd, stdout_fd, stderr_fd, report_fd, sync_fd, plan_fd, lifeline_fd, init_exe_fd;
  int exec_notify_fd;    // write end of a pipe, kept close-on-exec: its EOF tells the parent
                         // that the child has exec'd init (or died) and no longer uses its memory
  const char* root_dir;  // host path of the new root: the root template's (root_template.h)
  const char* put_old;   // root_dir + "/.oldroot"
  const char* old_root_inside;  // "/.oldroot"
  const MountStep* mount_steps;
  size_t mount_step_count;
  const char* hostname;
};

// Runs one step; false with errno set when its call failed. Child-safe (no allocation); the
// parent builds the root template with it too.
bool RunMountStep(const MountStep& step);

// The child's set-up up to (not including) the exec of sandrun-init: the fds in their places
// (init_plan.h; an fd of -1 in `plan` leaves its number closed), the sync byte, the
// namespace's root ids, the cgroup namespace, the mounts, pivot_root and the hostname. On a
// failure it reports the step on the report fd and exits 127. ChildMain and the zygote
// (zygote_module.cc) both run it.
void ChildSetUp(const ChildPlan& plan);

// Entry point for clone(2): returns the child's exit code. Child-safe by construction: no
// allocation, no lock, only system calls (and errno, which with CLONE_VM is the cloning
// thread's: that thread only waits while the child can fail a call).
int ChildMain(void* plan);

}  // namespace sandrun::sandbox
