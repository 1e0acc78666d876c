// Child side, one step per line in ChildMain. Order matters:
//  1. wait for the parent to write uid/gid maps and join the cgroup (sync pipe);
//  2. new cgroup namespace (after joining the run's cgroup so it is the namespace's root);
//  3. mounts: private propagation, the run's own mounts on the root template's mount points
//     (the template, read-only and shared by every run, is already in the namespace that
//     clone(CLONE_NEWNS) copied: root_template.h), pivot_root into it, detach the old root;
//  4. execveat sandrun-init (init_main.cc) from the fd the daemon opened at start-up: from
//     here on pid 1 is a fresh small process, not a copy of the daemon, and it starts the
//     program (ids, capabilities, rlimits, seccomp) from the InitPlan memfd.
#include "sandbox/child.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

#include "sandbox/init_plan.h"
#include "sys/syscalls.h"

namespace sandrun::sandbox {
namespace {

constexpr int kReportFd = kInitReportFd;
constexpr int kSyncFd = 4;
constexpr int kExecNotifyFd = 8;

[[noreturn]] void Fail(ChildStep step, int detail) {
  ChildReport report{ChildReport::kSetupFailed, step, detail, sys::LastErrno(), 0};
  sys::WriteAll(kReportFd, &report, sizeof report);
  ::_exit(127);
}

// Moves the plan's fds to their numbers (init_plan.h) and closes every other inherited fd
// (other threads' pipes, the lifelines of other runs, must not leak into the sandbox).
bool ArrangeFds(const ChildPlan& plan) {
  struct Move {
    int from, to;
    bool cloexec;  // the report fd stays close-on-exec for the program
  };
  Move moves[] = {{plan.stdin_fd, 0, false},
                  {plan.stdout_fd, 1, false},
                  {plan.stderr_fd, 2, false},
                  {plan.report_fd, kReportFd, false},
                  {plan.sync_fd, kSyncFd, true},
                  {plan.plan_fd, kInitPlanFd, false},
                  {plan.lifeline_fd, kInitLifelineFd, false},
                  {plan.init_exe_fd, kInitExeFd, true},
                  {plan.exec_notify_fd, kExecNotifyFd, true}};
  // First above every target, so that no dup2 below overwrites a source not yet moved. A
  // plan without an fd (-1: the zygote's has no exec-notify pipe) leaves its number closed.
  for (Move& m : moves) {
    if (m.from < 0) continue;
    m.from = ::fcntl(m.from, F_DUPFD, 10);
    if (m.from < 0) return false;
  }
  for (const Move& m : moves) {
    if (m.from < 0) {
      ::close(m.to);
      continue;
    }
    if (::dup2(m.from, m.to) < 0) return false;
    if (m.cloexec) ::fcntl(m.to, F_SETFD, FD_CLOEXEC);
  }
  return ::syscall(SYS_close_range, static_cast<unsigned>(kExecNotifyFd + 1), ~0u, 0u) == 0;
}

}  // namespace

bool RunMountStep(const MountStep& s) {
  switch (s.op) {
    case MountOp::kMkdir:
      return ::mkdir(s.target, 0755) == 0 || sys::LastErrno() == EEXIST;
    case MountOp::kSymlink:
      return ::symlink(s.source, s.target) == 0;
    case MountOp::kFile:
      return sys::WriteFileInChild(s.target, s.data, s.data_size);
    case MountOp::kTmpfs:
      return ::mount(s.source[0] != 0 ? s.source : "tmpfs", s.target, "tmpfs", s.flags, s.data) ==
             0;
    case MountOp::kBind:
      if (::mount(s.source, s.target, nullptr, MS_BIND | MS_REC, nullptr) != 0) return false;
      // A bind mount takes new flags only through a remount (mount(2) "MS_BIND").
      return ::mount(nullptr, s.target, nullptr, MS_REMOUNT | MS_BIND | s.flags, nullptr) == 0;
    case MountOp::kBindOnly:
      return ::mount(s.source, s.target, nullptr, MS_BIND | MS_REC, nullptr) == 0;
    case MountOp::kProc:
      return ::mount("proc", s.target, "proc", s.flags, s.data) == 0;
    case MountOp::kMakePrivate:
      return ::mount(nullptr, s.target, nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
    case MountOp::kReadOnly:
      // Without MS_BIND: the superblock too, so no other mount of it can write either.
      return ::mount(nullptr, s.target, nullptr, MS_REMOUNT | MS_RDONLY | s.flags, s.data) == 0;
  }
  return false;
}

const char* ChildStepName(ChildStep step) {
  switch (step) {
    case ChildStep::kNone:
      return "none";
    case ChildStep::kSync:
      return "wait for parent (uid/gid maps, cgroup)";
    case ChildStep::kCgroupNamespace:
      return "unshare(CLONE_NEWCGROUP)";
    case ChildStep::kMountPrivate:
      return "make mounts private";
    case ChildStep::kMountStep:
      return "mount step";
    case ChildStep::kPivotRoot:
      return "pivot_root";
    case ChildStep::kHostname:
      return "sethostname";
    case ChildStep::kFork:
      return "fork program";
    case ChildStep::kSetGroups:
      return "setgroups";
    case ChildStep::kSetGid:
      return "setresgid";
    case ChildStep::kSetUid:
      return "setresuid";
    case ChildStep::kCapabilities:
      return "drop capabilities";
    case ChildStep::kNoNewPrivs:
      return "prctl(PR_SET_NO_NEW_PRIVS)";
    case ChildStep::kRlimit:
      return "setrlimit";
    case ChildStep::kChdir:
      return "chdir to workspace";
    case ChildStep::kSeccomp:
      return "load seccomp filter";
    case ChildStep::kExec:
      return "execve";
    case ChildStep::kExecInit:
      return "execveat sandrun-init";
    case ChildStep::kInitPlan:
      return "read the init plan";
    case ChildStep::kUserSysctl:
      return "write /proc/sys/user limit";
    case ChildStep::kOomScoreAdj:
      return "write oom_score_adj";
    case ChildStep::kSignalfd:
      return "signalfd in init";
  }
  return "unknown";
}

void ChildSetUp(const ChildPlan& plan) {
  // Dies with the daemon's thread that made us until the first credential change below
  // clears this (prctl(2)); sandrun-init sets it again after its execve and checks the
  // lifeline, which closes the window in between.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (!ArrangeFds(plan)) ::_exit(126);
  char go = 0;
  if (::read(kSyncFd, &go, 1) != 1 || go != 'G') Fail(ChildStep::kSync, 0);
  // Become the namespace's root (mapped to an unprivileged host id) so files made while
  // building the root have an owner the kernel can map.
  // Raw system calls (sys::SetIdsOfThisThread): glibc's would wait for the daemon's other
  // threads, which this child does not have.
  if (!sys::SetIdsOfThisThread(0, 0)) Fail(ChildStep::kSetUid, 0);
  if (::unshare(CLONE_NEWCGROUP) != 0) Fail(ChildStep::kCgroupNamespace, 0);
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    Fail(ChildStep::kMountPrivate, 0);
  }
  for (size_t i = 0; i < plan.mount_step_count; ++i) {
    if (!RunMountStep(plan.mount_steps[i])) Fail(ChildStep::kMountStep, static_cast<int>(i));
  }
  // The new root is the template, read-only already. Its mounts came into this namespace,
  // which belongs to the sandbox's user namespace, as copies from the daemon's: the kernel
  // locks them (mount_namespaces(7) "Restrictions on mount namespaces"): their read-only,
  // nosuid, nodev and noexec flags cannot be cleared, nor can one of them be unmounted to
  // uncover what is below it; only the whole old root is detached.
  if (::syscall(SYS_pivot_root, plan.root_dir, plan.put_old) != 0) Fail(ChildStep::kPivotRoot, 0);
  if (::chdir("/") != 0) Fail(ChildStep::kPivotRoot, 1);
  if (::umount2(plan.old_root_inside, MNT_DETACH) != 0) Fail(ChildStep::kPivotRoot, 2);
  // The empty /.oldroot stays: the template is read-only (and shared by every run).
  if (::sethostname(plan.hostname, __builtin_strlen(plan.hostname)) != 0) {
    Fail(ChildStep::kHostname, 0);
  }
}

int ChildMain(void* arg) {
  const ChildPlan& plan = *static_cast<const ChildPlan*>(arg);
  ChildSetUp(plan);
  static const char* const kInitArgv[] = {"sandrun-init", nullptr};
  static const char* const kInitEnv[] = {nullptr};
  ::syscall(SYS_execveat, kInitExeFd, "", kInitArgv, kInitEnv, AT_EMPTY_PATH);
  Fail(ChildStep::kExecInit, 0);
}

}  // namespace sandrun::sandbox
