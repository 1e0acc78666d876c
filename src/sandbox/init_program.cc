#include "sandbox/init_program.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "sys/syscalls.h"

namespace sandrun::sandbox {
[[noreturn]] void InitFail(ChildStep step, int detail, int err) {
  ChildReport report{ChildReport::kSetupFailed, step, detail, err, 0};
  sys::WriteAll(kInitReportFd, &report, sizeof report);
  ::_exit(127);
}

[[noreturn]] void InitFail(ChildStep step, int detail) { InitFail(step, detail, sys::LastErrno()); }

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
      InitFail(ChildStep::kUserSysctl, static_cast<int>(i));
    }
  }
}

namespace {

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

}  // namespace

std::vector<char*> CStrings(const std::vector<std::string>& in) {
  std::vector<char*> out;
  for (const auto& s : in) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

void PrepareProgram(const InitPlan& plan, bool reset_signals) {
  // Ignored signals and the blocked mask survive execve: give the program defaults.
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (reset_signals) {
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2}) {
      ::signal(sig, SIG_DFL);
    }
  }
  ::close(kInitLifelineFd);
  if (::setsid() < 0) InitFail(ChildStep::kFork, 0);
  // Inherited by every process the program starts (proc(5)); raising needs no privilege.
  const std::string adj = std::to_string(plan.oom_score_adj);
  if (!sys::WriteFileInChild("/proc/self/oom_score_adj", adj.data(), adj.size())) {
    InitFail(ChildStep::kOomScoreAdj, plan.oom_score_adj);
  }
  if (!DropCapabilities()) InitFail(ChildStep::kCapabilities, 0);
  if (::setgroups(0, nullptr) != 0) InitFail(ChildStep::kSetGroups, 0);
  if (::setresgid(plan.gid, plan.gid, plan.gid) != 0) InitFail(ChildStep::kSetGid, 0);
  if (::setresuid(plan.uid, plan.uid, plan.uid) != 0) InitFail(ChildStep::kSetUid, 0);
  if (!ClearCapabilitySets()) InitFail(ChildStep::kCapabilities, 1);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) InitFail(ChildStep::kNoNewPrivs, 0);
  for (const auto& r : plan.rlimits) {
    rlimit value{r.soft, r.hard};
    if (::setrlimit(static_cast<__rlimit_resource>(r.resource), &value) != 0) {
      InitFail(ChildStep::kRlimit, r.resource);
    }
  }
  if (::chdir(plan.workdir.c_str()) != 0) InitFail(ChildStep::kChdir, 0);
  // The id change made the process non-dumpable (its /proc/self owned by host root, which the
  // namespace cannot map); execve of a readable program makes it dumpable again: so here.
  if (!reset_signals && ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0) {
    InitFail(ChildStep::kCapabilities, 2);
  }
  sock_fprog program{static_cast<unsigned short>(plan.seccomp.size()),
                     const_cast<sock_filter*>(plan.seccomp.data())};
  if (!plan.seccomp.empty() && ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) != 0) {
    InitFail(ChildStep::kSeccomp, 0);
  }
}

}  // namespace sandrun::sandbox
