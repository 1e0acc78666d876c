// sandrun-init: pid 1 of every sandbox's pid namespace, its own small executable (and, in
// one other mode, the daemon's thaw watch: thaw_watch.h). The
// clone child of the daemon builds the namespaces and the new root, then
// execs this file (execveat on an fd the daemon opened at start-up), so init is a fresh
// single-threaded process of a few hundred KiB instead of a copy of the daemon's memory.
//
// Init, in order:
//  1. PR_SET_PDEATHSIG(SIGKILL) — here, after the last credential change and the execve
//     that both clear it (prctl(2)) — then checks the lifeline pipe once: if the daemon died
//     before the prctl, its write end is already closed (POLLHUP). From then on a dead daemon
//     kills init by either path, and init's death kills every process of the namespace
//     (pid_namespaces(7)).
//  2. reads the InitPlan from its memfd; writes the user namespace's own limits
//     (/proc/sys/user/max_inotify_instances, ...);
//  3. forks the program: raised oom_score_adj, no capabilities, the sandbox user,
//     no_new_privs, rlimits, seccomp last, execve;
//  4. reaps everything; when the program ends, a short grace for what it left, then reports
//     its wait status on the report pipe and exits. A hang-up of the lifeline at any time:
//     exits at once.
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "sandbox/child.h"
#include "sandbox/init_plan.h"
#include "sandbox/init_program.h"
#include "sandbox/thaw_watch.h"
#include "sys/syscalls.h"

namespace sandrun::sandbox {
namespace {

// True when the daemon's end of the lifeline is gone (it exited or was killed).
bool LifelineCut(int timeout_ms) {
  pollfd p{kInitLifelineFd, POLLIN, 0};
  int n = ::poll(&p, 1, timeout_ms);
  return n > 0 && (p.revents & (POLLHUP | POLLERR | POLLIN)) != 0;
}

[[noreturn]] void RunProgram(const InitPlan& plan) {
  PrepareProgram(plan, /*reset_signals=*/true);
  // The report pipe is init's alone: the program gets it only until its execve (a record it
  // wrote there would be taken for init's: a faked exit status or set-up failure).
  ::fcntl(kInitReportFd, F_SETFD, FD_CLOEXEC);
  std::vector<char*> argv = CStrings(plan.argv);
  std::vector<char*> envp = CStrings(plan.envp);
  ::execve(plan.program.c_str(), argv.data(), envp.data());
  InitFail(ChildStep::kExec, 0);
}

// Reaps every child that has exited; returns true if `program` was among them.
bool ReapAll(pid_t program, int* program_status) {
  bool found = false;
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, __WALL | WNOHANG);
    if (pid <= 0) return found;
    if (pid == program) {
      *program_status = status;
      found = true;
    }
  }
}

// After the program: give what it left running a short grace (so a fork bomb shows up as a
// hit process limit and a background writer can flush), then report and exit, which kills
// the rest. Returns at once when nothing is left.
[[noreturn]] void FinishAndReport(int program_status) {
  constexpr int kGraceSteps = 50;  // 50 x 5 ms
  for (int step = 0; step < kGraceSteps; ++step) {
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, __WALL | WNOHANG)) > 0) {
    }
    if (pid < 0 && sys::LastErrno() == ECHILD) break;  // nothing left
    if (LifelineCut(5)) ::_exit(0);
  }
  ChildReport report{ChildReport::kProgramExited, ChildStep::kNone, 0, 0, program_status};
  sys::WriteAll(kInitReportFd, &report, sizeof report);
  ::_exit(0);
}

[[noreturn]] void Supervise(pid_t program) {
  ::close(0);
  ::close(1);
  ::close(2);
  sigset_t chld;
  ::sigemptyset(&chld);
  ::sigaddset(&chld, SIGCHLD);
  const int sfd = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) InitFail(ChildStep::kSignalfd, 0);
  int program_status = 0;
  for (;;) {
    if (ReapAll(program, &program_status)) FinishAndReport(program_status);
    pollfd fds[2] = {{kInitLifelineFd, POLLIN, 0}, {sfd, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && sys::LastErrno() != EINTR) ::_exit(0);
    // The daemon is gone: exiting kills everything in the namespace.
    if (fds[0].revents != 0) ::_exit(0);
    signalfd_siginfo info;
    while (::read(sfd, &info, sizeof info) > 0) {
    }
  }
}

}  // namespace
}  // namespace sandrun::sandbox

// `sandrun-init --supervise PID`: the zygote's start (zygote_module.cc). The zygote's clone
// child built the root, wrote the user limits and forked the program (PID, already the
// sandbox's Python) before it exec'd this with SIGCHLD blocked: init only supervises.
// `sandrun-init --thaw-when-gone DIR`: the daemon's thaw watch (thaw_watch.h), no sandbox's
// init: it must outlive the daemon, so it is dispatched before the parent-death signal.
int main(int argc, char** argv) {
  using namespace sandrun::sandbox;
  if (argc == 3 && std::string(argv[1]) == kThawWatchFlag) ThawWhenGone(argv[2]);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (LifelineCut(0)) ::_exit(0);
  ::fcntl(kInitLifelineFd, F_SETFD, FD_CLOEXEC);
  if (argc == 3 && std::string(argv[1]) == "--supervise") {
    const pid_t program = static_cast<pid_t>(std::stol(argv[2]));
    ::close(kInitPlanFd);
    Supervise(program);
  }
  auto plan = DecodeInitPlan(ReadPlanBytes());
  if (!plan.ok()) InitFail(ChildStep::kInitPlan, 0, EINVAL);
  WriteUserSysctls(*plan);
  // SIGCHLD blocked before the fork, so no exit is missed by the signalfd (the program
  // unblocks it for itself).
  sigset_t chld;
  ::sigemptyset(&chld);
  ::sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  pid_t program = ::fork();
  if (program < 0) InitFail(ChildStep::kFork, 0);
  if (program == 0) RunProgram(*plan);
  Supervise(program);
}
