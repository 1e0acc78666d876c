// Child side, one step per line in ChildMain / RunProgram. Order matters:
//  1. wait for the parent to write uid/gid maps and join the cgroup (sync pipe);
//  2. new cgroup namespace (after joining the run's cgroup so it is the namespace's root);
//  3. mounts: private propagation, new root from the plan, pivot_root, detach the old root;
//  4. fork the program: drop groups/gid/uid, capabilities, no_new_privs, rlimits, seccomp
//     last (so the filter need not allow the setup calls), execve;
//  5. this process stays as the namespace's init: it reaps orphans and, when the program
//     exits, reports its wait status and exits, which kills everything left in the pid
//     namespace (pid_namespaces(7)).
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

#include "sandbox/seccomp.h"
#include "sys/syscalls.h"

namespace sandrun::sandbox {
namespace {

constexpr int kReportFd = 3;
constexpr int kSyncFd = 4;

[[noreturn]] void Fail(ChildStep step, int detail) {
  ChildReport report{ChildReport::kSetupFailed, step, detail, sys::LastErrno(), 0};
  sys::WriteAll(kReportFd, &report, sizeof report);
  ::_exit(127);
}

// Moves the plan's fds to 0..4 and closes every other inherited fd (other threads' pipes
// must not leak into the sandbox).
bool ArrangeFds(const ChildPlan& plan) {
  int report = ::fcntl(plan.report_fd, F_DUPFD, 10);
  int sync = ::fcntl(plan.sync_fd, F_DUPFD, 10);
  if (report < 0 || sync < 0) return false;
  if (::dup2(plan.stdin_fd, 0) < 0 || ::dup2(plan.stdout_fd, 1) < 0 ||
      ::dup2(plan.stderr_fd, 2) < 0 || ::dup2(report, kReportFd) < 0 || ::dup2(sync, kSyncFd) < 0) {
    return false;
  }
  // The report fd stays close-on-exec so the program never holds it.
  ::fcntl(kReportFd, F_SETFD, FD_CLOEXEC);
  ::fcntl(kSyncFd, F_SETFD, FD_CLOEXEC);
  return ::syscall(SYS_close_range, 5u, ~0u, 0u) == 0;
}

bool RunMountStep(const MountStep& s) {
  switch (s.op) {
    case MountOp::kMkdir:
      return ::mkdir(s.target, 0755) == 0 || sys::LastErrno() == EEXIST;
    case MountOp::kSymlink:
      return ::symlink(s.source, s.target) == 0;
    case MountOp::kFile:
      return sys::WriteFileInChild(s.target, s.data, s.data_size);
    case MountOp::kTmpfs:
      return ::mount("tmpfs", s.target, "tmpfs", s.flags, s.data) == 0;
    case MountOp::kBind:
      if (::mount(s.source, s.target, nullptr, MS_BIND | MS_REC, nullptr) != 0) return false;
      // A bind mount takes new flags only through a remount (mount(2) "MS_BIND").
      return ::mount(nullptr, s.target, nullptr, MS_REMOUNT | MS_BIND | s.flags, nullptr) == 0;
    case MountOp::kProc:
      return ::mount("proc", s.target, "proc", s.flags, s.data) == 0;
    case MountOp::kRemountRoot:
      return true;  // done after pivot_root
  }
  return false;
}

bool DropCapabilities() {
  // Bounding and ambient sets first (needs CAP_SETPCAP, which we still hold), then the
  // effective/permitted/inheritable sets (capabilities(7)).
  for (int cap = 0; cap <= 63; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && sys::LastErrno() != EINVAL) return false;
  }
  ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  return true;
}

bool ClearCapabilitySets() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  return ::syscall(SYS_capset, &header, data) == 0;
}

[[noreturn]] void RunProgram(const ChildPlan& plan) {
  // Ignored signals and the blocked mask survive execve: give the program defaults.
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2}) {
    ::signal(sig, SIG_DFL);
  }
  if (::setsid() < 0) Fail(ChildStep::kFork, 0);
  if (!DropCapabilities()) Fail(ChildStep::kCapabilities, 0);
  if (::setgroups(0, nullptr) != 0) Fail(ChildStep::kSetGroups, 0);
  if (::setresgid(plan.gid, plan.gid, plan.gid) != 0) Fail(ChildStep::kSetGid, 0);
  if (::setresuid(plan.uid, plan.uid, plan.uid) != 0) Fail(ChildStep::kSetUid, 0);
  if (!ClearCapabilitySets()) Fail(ChildStep::kCapabilities, 1);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) Fail(ChildStep::kNoNewPrivs, 0);
  for (size_t i = 0; i < plan.rlimit_count; ++i) {
    if (::setrlimit(static_cast<__rlimit_resource>(plan.rlimits[i].resource),
                    &plan.rlimits[i].value) != 0) {
      Fail(ChildStep::kRlimit, plan.rlimits[i].resource);
    }
  }
  if (::chdir(plan.workdir) != 0) Fail(ChildStep::kChdir, 0);
  if (LoadSeccompInChild(plan.seccomp_program) != 0) Fail(ChildStep::kSeccomp, 0);
  ::execve(plan.program, const_cast<char* const*>(plan.argv), const_cast<char* const*>(plan.envp));
  Fail(ChildStep::kExec, 0);
}

// Init of the pid namespace: reap everything; when the program itself ends, give what it
// left running a short grace (so a fork bomb shows up as a hit process limit and a
// background writer can flush), then report and exit, which kills the rest (SIGKILL to
// every process of the namespace, pid_namespaces(7)). Returns at once when nothing is left.
[[noreturn]] void RunInit(pid_t program) {
  ::close(0);
  ::close(1);
  ::close(2);
  ::close(kSyncFd);
  int program_status = 0;
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, __WALL);
    if (pid < 0 && sys::LastErrno() == EINTR) continue;
    if (pid == program) {
      program_status = status;
      break;
    }
    if (pid < 0) break;  // ECHILD: cannot happen before the program ends
  }
  constexpr int kGraceSteps = 20;  // 20 x 5 ms
  for (int step = 0; step < kGraceSteps; ++step) {
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, __WALL | WNOHANG)) > 0) {
    }
    if (pid < 0 && sys::LastErrno() == ECHILD) break;  // nothing left
    struct timespec pause = {0, 5 * 1000 * 1000};
    ::nanosleep(&pause, nullptr);
  }
  ChildReport report{ChildReport::kProgramExited, ChildStep::kNone, 0, 0, program_status};
  sys::WriteAll(kReportFd, &report, sizeof report);
  ::_exit(0);
}

}  // namespace

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
  }
  return "unknown";
}

int ChildMain(void* arg) {
  const ChildPlan& plan = *static_cast<const ChildPlan*>(arg);
  // Die with the daemon's thread that made us (PDEATHSIG is per creating thread; that
  // thread waits for us until the end of the run).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (!ArrangeFds(plan)) ::_exit(126);
  char go = 0;
  if (::read(kSyncFd, &go, 1) != 1 || go != 'G') Fail(ChildStep::kSync, 0);
  // Become the namespace's root (mapped to an unprivileged host id) so files made while
  // building the root have an owner the kernel can map.
  if (::setresgid(0, 0, 0) != 0) Fail(ChildStep::kSetGid, 0);
  if (::setresuid(0, 0, 0) != 0) Fail(ChildStep::kSetUid, 0);
  if (::unshare(CLONE_NEWCGROUP) != 0) Fail(ChildStep::kCgroupNamespace, 0);
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    Fail(ChildStep::kMountPrivate, 0);
  }
  unsigned long root_flags = 0;
  for (size_t i = 0; i < plan.mount_step_count; ++i) {
    if (plan.mount_steps[i].op == MountOp::kRemountRoot) root_flags = plan.mount_steps[i].flags;
    if (!RunMountStep(plan.mount_steps[i])) Fail(ChildStep::kMountStep, static_cast<int>(i));
  }
  if (::syscall(SYS_pivot_root, plan.root_dir, plan.put_old) != 0) Fail(ChildStep::kPivotRoot, 0);
  if (::chdir("/") != 0) Fail(ChildStep::kPivotRoot, 1);
  if (::umount2(plan.old_root_inside, MNT_DETACH) != 0) Fail(ChildStep::kPivotRoot, 2);
  if (::rmdir(plan.old_root_inside) != 0) Fail(ChildStep::kPivotRoot, 3);
  if (root_flags != 0 &&
      ::mount(nullptr, "/", nullptr, MS_REMOUNT | MS_BIND | root_flags, nullptr) != 0) {
    Fail(ChildStep::kPivotRoot, 4);
  }
  if (::sethostname(plan.hostname, __builtin_strlen(plan.hostname)) != 0) {
    Fail(ChildStep::kHostname, 0);
  }
  // Raw fork: glibc's fork() runs atfork handlers, which are not ours to run here.
  pid_t program = static_cast<pid_t>(::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0));
  if (program < 0) Fail(ChildStep::kFork, 0);
  if (program == 0) RunProgram(plan);
  RunInit(program);
}

}  // namespace sandrun::sandbox
