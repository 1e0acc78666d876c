// sandrun-init: pid 1 of every sandbox's pid namespace, its own small executable. The
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
#include "sys/syscalls.h"

namespace sandrun::sandbox {
namespace {

[[noreturn]] void Fail(ChildStep step, int detail, int err = sys::LastErrno()) {
  ChildReport report{ChildReport::kSetupFailed, step, detail, err, 0};
  sys::WriteAll(kInitReportFd, &report, sizeof report);
  ::_exit(127);
}

// True when the daemon's end of the lifeline is gone (it exited or was killed).
bool LifelineCut(int timeout_ms) {
  pollfd p{kInitLifelineFd, POLLIN, 0};
  int n = ::poll(&p, 1, timeout_ms);
  return n > 0 && (p.revents & (POLLHUP | POLLERR | POLLIN)) != 0;
}

std::string ReadPlanBytes() {
  std::string bytes;
  char buf[65536];
  off_t offset = 0;
  for (;;) {
    ssize_t n = ::pread(kInitPlanFd, buf, sizeof buf, offset);
    if (n < 0 && sys::LastErrno() == EINTR) continue;
    if (n <= 0) break;
    bytes.append(buf, static_cast<size_t>(n));
    offset += n;
  }
  ::close(kInitPlanFd);
  return bytes;
}

void WriteUserSysctls(const InitPlan& plan) {
  for (size_t i = 0; i < plan.user_sysctls.size(); ++i) {
    const auto& [name, value] = plan.user_sysctls[i];
    const std::string path = "/proc/sys/user/" + name;
    // A kernel without this limit has no file: nothing to bound there.
    if (!sys::WriteFileInChild(path.c_str(), value.data(), value.size()) &&
        sys::LastErrno() != ENOENT) {
      Fail(ChildStep::kUserSysctl, static_cast<int>(i));
    }
  }
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

std::vector<char*> CStrings(const std::vector<std::string>& in) {
  std::vector<char*> out;
  for (const auto& s : in) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

[[noreturn]] void RunProgram(const InitPlan& plan) {
  // Ignored signals and the blocked mask survive execve: give the program defaults.
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2}) {
    ::signal(sig, SIG_DFL);
  }
  ::close(kInitLifelineFd);
  if (::setsid() < 0) Fail(ChildStep::kFork, 0);
  // Inherited by every process the program starts (proc(5)); raising needs no privilege.
  const std::string adj = std::to_string(plan.oom_score_adj);
  if (!sys::WriteFileInChild("/proc/self/oom_score_adj", adj.data(), adj.size())) {
    Fail(ChildStep::kOomScoreAdj, plan.oom_score_adj);
  }
  if (!DropCapabilities()) Fail(ChildStep::kCapabilities, 0);
  if (::setgroups(0, nullptr) != 0) Fail(ChildStep::kSetGroups, 0);
  if (::setresgid(plan.gid, plan.gid, plan.gid) != 0) Fail(ChildStep::kSetGid, 0);
  if (::setresuid(plan.uid, plan.uid, plan.uid) != 0) Fail(ChildStep::kSetUid, 0);
  if (!ClearCapabilitySets()) Fail(ChildStep::kCapabilities, 1);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) Fail(ChildStep::kNoNewPrivs, 0);
  for (const auto& r : plan.rlimits) {
    rlimit value{r.soft, r.hard};
    if (::setrlimit(static_cast<__rlimit_resource>(r.resource), &value) != 0) {
      Fail(ChildStep::kRlimit, r.resource);
    }
  }
  if (::chdir(plan.workdir.c_str()) != 0) Fail(ChildStep::kChdir, 0);
  std::vector<char*> argv = CStrings(plan.argv);
  std::vector<char*> envp = CStrings(plan.envp);
  sock_fprog program{static_cast<unsigned short>(plan.seccomp.size()),
                     const_cast<sock_filter*>(plan.seccomp.data())};
  if (!plan.seccomp.empty() && ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) != 0) {
    Fail(ChildStep::kSeccomp, 0);
  }
  ::execve(plan.program.c_str(), argv.data(), envp.data());
  Fail(ChildStep::kExec, 0);
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
  if (sfd < 0) Fail(ChildStep::kSignalfd, 0);
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

int main() {
  using namespace sandrun::sandbox;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (LifelineCut(0)) ::_exit(0);
  ::fcntl(kInitLifelineFd, F_SETFD, FD_CLOEXEC);
  auto plan = DecodeInitPlan(ReadPlanBytes());
  if (!plan.ok()) Fail(ChildStep::kInitPlan, 0, EINVAL);
  WriteUserSysctls(*plan);
  // SIGCHLD blocked before the fork, so no exit is missed by the signalfd (the program
  // unblocks it for itself).
  sigset_t chld;
  ::sigemptyset(&chld);
  ::sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  pid_t program = ::fork();
  if (program < 0) Fail(ChildStep::kFork, 0);
  if (program == 0) RunProgram(*plan);
  Supervise(program);
}
