#include "sandbox/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "sandbox/child.h"
#include "sandbox/init_plan.h"
#include "sandbox/mounts.h"
#include "sandbox/net_namespace_pool.h"
#include "sandbox/network.h"
#include "sys/netns.h"
#include "sys/stack_mapping.h"
#include "sys/syscalls.h"
#include "util/phases.h"
#include "util/text.h"

namespace sandrun::sandbox {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kChildStackBytes = 256 * 1024;
// How often the supervision reads the run's CPU time from its cgroup, the first time one
// period after the start (no CPU limit is under 1 s, so a run shorter than this reads none).
constexpr auto kCpuCheckEvery = std::chrono::milliseconds(100);

std::vector<InitRlimit> Rlimits(const SandboxLimits& limits, bool have_cgroups) {
  auto both = [](int resource, rlim_t v) { return InitRlimit{resource, v, v}; };
  std::vector<InitRlimit> out = {
      // SIGXCPU at the soft limit, SIGKILL one second later (setrlimit(2)).
      {RLIMIT_CPU, static_cast<rlim_t>(limits.cpu_time_s),
       static_cast<rlim_t>(limits.cpu_time_s + 1)},
      both(RLIMIT_FSIZE, RlimitFsizeBytes(limits.file_size_bytes)),
      both(RLIMIT_NOFILE, static_cast<rlim_t>(limits.open_files)),
      both(RLIMIT_CORE, 0),
      both(RLIMIT_MEMLOCK, 64 * 1024),
      both(RLIMIT_MSGQUEUE, 0),
  };
  if (!have_cgroups) {
    // Weaker stand-ins: address space (not resident memory) and processes per uid.
    out.push_back(both(RLIMIT_AS, limits.cgroup.memory_bytes));
    out.push_back(both(RLIMIT_NPROC, static_cast<rlim_t>(limits.cgroup.processes)));
  }
  return out;
}

InitPlan MakeInitPlan(const SandboxSpec& spec, const sock_fprog* seccomp, bool have_cgroups,
                      const UserSysctls& user_sysctls) {
  InitPlan plan;
  plan.workdir = "/home/user";
  plan.program = spec.argv[0];
  plan.argv = spec.argv;
  plan.envp = spec.env;
  plan.rlimits = Rlimits(spec.limits, have_cgroups);
  plan.seccomp.assign(seccomp->filter, seccomp->filter + seccomp->len);
  // Per-user-namespace counters (kernel/ucount.c) are charged at every level up to the
  // host, where the namespace's owner pays (the sandbox uid, see StartChild). Bounding them
  // in the run's own namespace, to shares that add up to less than the host's limit
  // (user_limits.h), keeps one run from taking that uid's limit from the runs beside it.
  plan.user_sysctls = user_sysctls;
  return plan;
}

Status WriteIdMaps(pid_t pid, uid_t host_uid, gid_t host_gid) {
  // user_namespaces(7): lines "inside-id host-id count", written by a privileged parent
  // (so no "setgroups deny" is needed). Inside root (the namespace's init, which builds the
  // mounts; files it creates need a mapped owner, else EOVERFLOW) maps to host id + 1, the
  // sandbox user to the host id itself. Neither is a privileged host id.
  std::string proc = "/proc/" + std::to_string(pid);
  auto map = [](unsigned inside_user, unsigned host) {
    return "0 " + std::to_string(host + 1) + " 1\n" + std::to_string(inside_user) + " " +
           std::to_string(host) + " 1\n";
  };
  Status s = sys::WriteFile(proc + "/uid_map", map(kInsideUid, host_uid));
  if (!s.ok()) return s;
  return sys::WriteFile(proc + "/gid_map", map(kInsideGid, host_gid));
}

// Reads what is available on `fd` into `buffer`; returns false at EOF or error.
bool Drain(int fd, util::HeadTailBuffer& buffer, OutputObserver* observer, int stream) {
  char chunk[65536];
  for (;;) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n > 0) {
      buffer.Append(std::string_view(chunk, static_cast<size_t>(n)));
      if (observer) observer->OnOutput(stream, std::string_view(chunk, static_cast<size_t>(n)));
      continue;
    }
    if (n < 0 && sys::LastErrno() == EINTR) continue;
    if (n < 0 && sys::LastErrno() == EAGAIN) return true;
    return false;
  }
}

// Appends what is available on `fd` to `out` up to `cap` bytes (the rest is read and
// dropped); returns false at EOF or error.
bool DrainString(int fd, std::string& out, size_t cap) {
  char chunk[65536];
  for (;;) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n > 0) {
      out.append(chunk, std::min(static_cast<size_t>(n), cap - std::min(cap, out.size())));
      continue;
    }
    if (n < 0 && sys::LastErrno() == EINTR) continue;
    if (n < 0 && sys::LastErrno() == EAGAIN) return true;
    return false;
  }
}

struct Pipes {
  sys::Pipe in, out, err, report, sync, lifeline, exec_notify;
};

// A started sandbox: the parent's ends of its pipes, its pidfd and cgroup.
struct Started {
  pid_t pid = -1;
  sys::UniqueFd pidfd;
  Pipes pipes;
  sys::UniqueFd plan_fd;
  RunCgroup* cgroup = nullptr;          // the caller's; null without cgroups
  CgroupStats base;                     // the cgroup's counters just before the clone
  std::unique_ptr<RunNetwork> network;  // with spec.network.enabled
  Clock::time_point start;
  // The clone child's stack, in our memory (CLONE_VM): unmapped once the child has exec'd.
  sys::StackMapping child_stack;
  // Made by the zygote: init is the zygote's child (it reaps it), the pidfd tells its end.
  bool from_zygote = false;
  // The network namespace the pool made ahead (NetNamespacePool), which the child started in;
  // invalid when the child made its own. Given back after the run (GiveBackNetNamespace).
  sys::UniqueFd netns;
};

// What the poll loop saw.
struct Supervised {
  RunFacts facts;
  std::string stdout_text, stderr_text;
  bool stdout_truncated = false, stderr_truncated = false;
  ChildReport report{};
};

// The counters of `now` since `base` (earlier processes of the same cgroup: a session's
// restore, an earlier step). Peak memory stays the cgroup's own: v1 could reset it, v2 only
// per open file (Linux 6.12), so it is the peak so far on both.
CgroupStats Since(const CgroupStats& now, const CgroupStats& base) {
  CgroupStats d = now;
  d.oom_kills = std::max<int64_t>(0, now.oom_kills - base.oom_kills);
  d.pids_limit_hits = std::max<int64_t>(0, now.pids_limit_hits - base.pids_limit_hits);
  if (now.cpu_usage_ms >= 0 && base.cpu_usage_ms >= 0) {
    d.cpu_usage_ms = std::max<int64_t>(0, now.cpu_usage_ms - base.cpu_usage_ms);
  }
  return d;
}

}  // namespace

const char* OutcomeName(RunOutcome outcome) {
  switch (outcome) {
    case RunOutcome::kExited:
      return "exited";
    case RunOutcome::kSignaled:
      return "signaled";
    case RunOutcome::kWallTimeout:
      return "wall_timeout";
    case RunOutcome::kCpuTimeout:
      return "cpu_timeout";
    case RunOutcome::kMemoryLimit:
      return "memory_limit";
    case RunOutcome::kOutputLimit:
      return "output_limit";
  }
  return "unknown";
}

RunOutcome ClassifyOutcome(const RunFacts& f) {
  if (f.flooded) return RunOutcome::kOutputLimit;
  if (f.timed_out) return RunOutcome::kWallTimeout;
  if (f.cpu_out) return RunOutcome::kCpuTimeout;
  if (f.oom_kills > 0) return RunOutcome::kMemoryLimit;
  if (!f.have_report) return RunOutcome::kSignaled;  // init died without a report: killed
  const int ws = f.wait_status;
  if (WIFSIGNALED(ws) &&
      (WTERMSIG(ws) == SIGXCPU || (WTERMSIG(ws) == SIGKILL && f.cpu_ms >= f.cpu_limit_ms))) {
    return RunOutcome::kCpuTimeout;
  }
  if (WIFSIGNALED(ws)) return RunOutcome::kSignaled;
  return RunOutcome::kExited;
}

Result<std::string> InitExecutablePath(const std::string& configured) {
  if (!configured.empty()) return configured;
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return sys::ErrnoError("readlink /proc/self/exe");
  const std::string exe(self, static_cast<size_t>(n));
  return exe.substr(0, exe.rfind('/') + 1) + "sandrun-init";
}

Result<sys::UniqueFd> OpenInitExecutable(const std::string& configured) {
  auto path = InitExecutablePath(configured);
  if (!path.ok()) return path.error();
  auto fd = sys::OpenExecutable(*path);
  if (!fd.ok()) {
    return MakeError(
        ErrorKind::kSystem,
        fd.error().message + " (sandrun-init is installed beside sandrund: install both)");
  }
  return fd;
}

Launcher::Launcher(SeccompFilter filter, std::unique_ptr<CgroupManager> cgroups,
                   RootTemplatePaths root_template, sys::UniqueFd init_exe)
    : filter_(std::move(filter)),
      cgroups_(std::move(cgroups)),
      root_template_(std::move(root_template)),
      init_exe_(std::move(init_exe)) {}

namespace {

// Clones the sandbox's first process into its new namespaces. The clone is made while this
// thread's effective uid is the sandbox's host uid, so the new user namespace is OWNED by
// that uid, not by root: the per-user counters the kernel charges to a namespace's owner
// (inotify instances and watches, pending signals, mqueue bytes; user_namespaces(7),
// kernel/ucount.c) then fall on the sandbox uid and never exhaust host root's. The
// daemon (still root in the parent namespace) writes the id maps.
//
// CLONE_VM: the child runs in the daemon's memory, on `stack`, until it execs sandrun-init,
// as posix_spawn's child does (without CLONE_VFORK: the parent must write the id maps while
// the child waits). A copy of the address space instead cost, per run, the copy of the
// daemon's page tables and a write fault on every page its threads then touched (perf of a
// 4-client load: dup_mmap 4.6% and do_wp_page 3.3% of all CPU samples; with CLONE_VM neither
// shows, and sandrund's share of the samples went from 27% to 12%).
//
// `netns`: a network namespace made ahead (NetNamespacePool), or -1 for a new one. The thread
// joins it just for the clone, as root (setns needs CAP_SYS_ADMIN over its owner), so the
// child starts there; `home` is the thread's own, to go back to.
Result<pid_t> CloneChild(ChildPlan& plan, uid_t owner, char* stack_top, int* pidfd, int netns,
                         int home) {
  if (netns >= 0 && !sys::EnterNetNamespace(netns).ok()) netns = -1;
  unsigned long flags = CLONE_VM | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC |
                        CLONE_NEWUTS | CLONE_PIDFD | SIGCHLD;
  if (netns < 0) flags |= CLONE_NEWNET;
  Status uid = sys::SetThreadEffectiveUid(owner);
  pid_t pid = uid.ok() ? ::clone(ChildMain, stack_top, static_cast<int>(flags), &plan, pidfd) : -1;
  Error clone_error = pid < 0 ? sys::ErrnoError("clone(CLONE_NEWUSER|...)") : Error{};
  // Cannot fail (real and saved uid are 0); a worker thread left unprivileged, or in a run's
  // network namespace (every later socket of it would be there), could not go on.
  if (!sys::SetThreadEffectiveUid(0).ok()) std::abort();
  if (netns >= 0 && !sys::EnterNetNamespace(home).ok()) std::abort();
  if (!uid.ok()) return uid.error();
  if (pid < 0) return clone_error;
  return pid;
}

// The run's seven pipes. The program's own streams belong to the sandbox user, so that
// /dev/stdout and friends (links to /proc/self/fd/N) open as on any Linux box.
Result<Pipes> MakePipes(const SandboxSpec& spec) {
  Pipes p;
  for (sys::Pipe* pipe : {&p.in, &p.out, &p.err, &p.report, &p.sync, &p.lifeline, &p.exec_notify}) {
    auto made = sys::MakePipe();
    if (!made.ok()) return made.error();
    *pipe = std::move(*made);
  }
  for (const sys::Pipe* pipe : {&p.in, &p.out, &p.err}) {
    if (Status s = sys::ChownPipe(*pipe, spec.host_uid, spec.host_gid); !s.ok()) return s.error();
  }
  return p;
}

// What the cloned child gets: the child's ends of `st`'s pipes and the mount plan, as plain
// fds and pointers (ChildMain allocates nothing). Pointers into `mounts`.
ChildPlan MakeChildPlan(const Started& st, const MountPlan& mounts, int init_exe) {
  const Pipes& p = st.pipes;
  ChildPlan plan{};
  plan.stdin_fd = p.in.read.get();
  plan.stdout_fd = p.out.write.get();
  plan.stderr_fd = p.err.write.get();
  plan.report_fd = p.report.write.get();
  plan.sync_fd = p.sync.read.get();
  plan.plan_fd = st.plan_fd.get();
  plan.lifeline_fd = p.lifeline.read.get();
  plan.init_exe_fd = init_exe;
  plan.exec_notify_fd = p.exec_notify.write.get();
  plan.root_dir = mounts.root.c_str();
  plan.put_old = mounts.put_old.c_str();
  plan.old_root_inside = "/.oldroot";
  plan.mount_steps = mounts.steps.data();
  plan.mount_step_count = mounts.steps.size();
  plan.hostname = "sandbox";
  return plan;
}

// Clones the child and records its pid, pidfd and start time, and the cgroup's counters
// just before. Returns whether the child started inside the run's cgroup (else the parent
// moves it there before the sync byte).
// `home`: the thread's own network namespace, to go back to after the clone in st.netns.
Result<bool> CloneIntoRun(Started& st, ChildPlan& plan, uid_t owner, int home) {
  int pidfd_raw = -1;
  if (Status s = st.child_stack.Map(kChildStackBytes); !s.ok()) return s.error();
  // The child is cloned from inside the run's cgroup (cgroup.h EnterCallingThread): it
  // starts there and no process migration waits on the request path (on v1 ~10 ms of RCU
  // grace period per run; measured by scripts/bench --profile). The
  // thread's move needs no global lock. On v2 (no thread may sit in a domain cgroup) and when
  // the clone is refused inside (pids.max reached by this thread and init together, say,
  // processes = 1) the parent moves the child instead, as before.
  // The counters first: reading them allocates, and what this thread faults in while it sits
  // in the run's cgroup is charged to that cgroup.
  if (st.cgroup) st.base = st.cgroup->BaseStats();
  bool placed = st.cgroup && st.cgroup->EnterCallingThread().ok();
  if (placed) util::StampPhase("thread_in_cgroup");
  st.start = Clock::now();
  auto pid = CloneChild(plan, owner, st.child_stack.top(), &pidfd_raw, st.netns.get(), home);
  // This worker thread must not stay in a run's cgroup (it would count against the run and
  // keep the cgroup busy); its own cgroup exists while the daemon runs, so this cannot fail
  // short of a broken host, on which the daemon must not go on.
  if (placed && !st.cgroup->LeaveCallingThread().ok()) std::abort();
  if (!pid.ok() && placed) {
    placed = false;
    st.base = st.cgroup->BaseStats();  // the refused fork is not the run's
    pid = CloneChild(plan, owner, st.child_stack.top(), &pidfd_raw, st.netns.get(), home);
  }
  if (!pid.ok()) return pid.error();
  util::StampPhase("cloned");
  st.pid = *pid;
  st.pidfd = sys::UniqueFd(pidfd_raw);
  return placed;
}

// The zygote's request for the sandbox `mounts` describes (the ChildPlan's paths and steps).
ZygoteRequest MakeZygoteRequest(const MountPlan& mounts, uid_t owner, bool new_net) {
  ZygoteRequest request;
  request.owner_uid = owner;
  request.new_net = new_net;
  request.root_dir = mounts.root;
  request.put_old = mounts.put_old;
  request.hostname = "sandbox";
  for (const MountStep& s : mounts.steps) {
    ZygoteRequest::Step step;
    step.op = static_cast<int>(s.op);
    step.has_source = s.source != nullptr;
    if (s.source != nullptr) step.source = s.source;
    step.target = s.target;
    step.has_data = s.data != nullptr;
    if (s.data != nullptr) {
      step.data.assign(s.data, s.data_size != 0 ? s.data_size : std::strlen(s.data));
    }
    step.flags = s.flags;
    request.steps.push_back(std::move(step));
  }
  return request;
}

// As CloneIntoRun, by the zygote: it clones the child (owned by the sandbox uid, in a network
// namespace made ahead when there is one) and passes back its pid and pidfd. The child
// starts outside the run's cgroup: the parent moves it there (returns false).
Result<bool> ZygoteIntoRun(Started& st, const MountPlan& mounts, int init_exe, uid_t owner,
                           Zygote& zygote) {
  const sys::UniqueFd& netns = st.netns;
  const Pipes& p = st.pipes;
  std::vector<int> fds = {p.in.read.get(),       p.out.write.get(), p.err.write.get(),
                          p.report.write.get(),  p.sync.read.get(), st.plan_fd.get(),
                          p.lifeline.read.get(), init_exe};
  if (netns.valid()) fds.push_back(netns.get());
  if (st.cgroup) st.base = st.cgroup->BaseStats();
  st.start = Clock::now();
  auto child = zygote.Spawn(MakeZygoteRequest(mounts, owner, !netns.valid()), fds);
  if (!child.ok()) return child.error();
  util::StampPhase("zygote_cloned");
  st.pid = child->pid;
  st.pidfd = std::move(child->pidfd);
  st.from_zygote = true;
  return false;
}

// Waits until the process of `pidfd` (not our child: the zygote's) has ended.
void AwaitExit(int pidfd) {
  pollfd p{pidfd, POLLIN, 0};
  while (::poll(&p, 1, -1) < 0 && sys::LastErrno() == EINTR) {
  }
}

// Closes the child's ends now so EOF means "every process of the run is gone". The
// lifeline's write end stays with us alone until Run returns.
void CloseChildEnds(Started& st) {
  Pipes& p = st.pipes;
  p.in.read.Reset();
  p.out.write.Reset();
  p.err.write.Reset();
  p.report.write.Reset();
  p.sync.read.Reset();
  p.lifeline.read.Reset();
  p.exec_notify.write.Reset();
  st.plan_fd.Reset();
}

// How long the child may take from the sync byte to its exec of sandrun-init (its mounts).
constexpr int kChildSetupTimeoutMs = 30000;

// Waits until the child no longer runs in our memory: EOF on the exec-notify pipe, whose
// write end only the child holds, close-on-exec, so it closes when the child execs init or
// exits (after its memory is let go: exec_mmap before the close-on-exec files, exit_mm
// before exit_files). Then frees the child's stack. A child stuck past the timeout is
// killed, and the wait goes on until it is gone (SIGKILL is not refused).
void AwaitChildExec(Started& st) {
  const int fd = st.pipes.exec_notify.read.get();
  bool killed = false;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, killed ? -1 : kChildSetupTimeoutMs);
    if (ready == 0) {
      sys::KillPidfd(st.pidfd.get());
      killed = true;
      continue;
    }
    // Neither call can fail but by EINTR on this fd, and errno is not ours to read until
    // the child is gone (it shares this thread's): a failure is tried again.
    if (ready < 0) continue;
    char byte;
    if (::read(fd, &byte, 1) == 0) break;  // EOF (nothing is ever written)
  }
  st.pipes.exec_notify.read.Reset();
  st.child_stack.Reset();
}

// The parent's side of the start, in order, while the child waits for the sync byte: the
// id maps, the cgroup (unless the child started in it), the network, then the sync byte.
Status SetUpChildFromParent(Started& st, const SandboxSpec& spec, bool placed) {
  if (Status s = WriteIdMaps(st.pid, spec.host_uid, spec.host_gid); !s.ok()) return s;
  util::StampPhase("id_maps");
  if (st.cgroup && !placed) {
    if (Status s = st.cgroup->AddProcess(st.pid); !s.ok()) return s;
    util::StampPhase("cgroup_placed");
  } else if (st.cgroup) {
    // The cgroup2 directory of the socket cap, which the cloning thread could not enter.
    if (Status s = st.cgroup->AddAfterClone(st.pid); !s.ok()) return s;
  }
  // The network and its firewall before the sync byte: the program starts with both.
  if (spec.network.enabled) {
    auto network = RunNetwork::Start(st.pid, spec.network, st.cgroup);
    if (!network.ok()) return network.error();
    st.network = std::move(*network);
  }
  if (!sys::WriteAll(st.pipes.sync.write.get(), "G", 1)) {
    return sys::ErrnoError("write sync pipe");
  }
  st.pipes.sync.write.Reset();
  util::StampPhase("sync_sent");
  return OkStatus();
}

// Starts the sandbox: pipes and init's plan, the clone, then the parent's side of the
// set-up; the child is killed and reaped when that fails.
// `nets`: the pool of network namespaces made ahead (null: the child makes its own).
Result<Started> Start(const SandboxSpec& spec, const MountPlan& mounts, const SeccompFilter& filter,
                      RunCgroup* cgroup, int init_exe, NetNamespacePool* nets,
                      const UserSysctls& user_sysctls, Zygote* zygote = nullptr) {
  Started st;
  // An earlier step's init still exiting in this cgroup would count against its pids.max.
  if (cgroup) cgroup->ReapExiting();
  auto pipes = MakePipes(spec);
  if (!pipes.ok()) return pipes.error();
  st.pipes = std::move(*pipes);
  auto plan_fd =
      sys::MemfdWith("sandrun-init-plan",
                     EncodeInitPlan(MakeInitPlan(spec, filter.program(), cgroup, user_sysctls)));
  if (!plan_fd.ok()) return MakeError(ErrorKind::kSystem, plan_fd.error().message);
  st.plan_fd = std::move(*plan_fd);
  util::StampPhase("pipes_plan");
  st.cgroup = cgroup;

  ChildPlan plan = MakeChildPlan(st, mounts, init_exe);
  // Before the thread enters the run's cgroup (CloneIntoRun): the pool's thread starts from
  // this one.
  const bool made_ahead = nets != nullptr && !spec.network.enabled;
  if (made_ahead) st.netns = nets->Take(spec.net_owner);
  const int home = made_ahead ? nets->home() : -1;
  auto placed = zygote != nullptr ? ZygoteIntoRun(st, mounts, init_exe, spec.host_uid, *zygote)
                                  : CloneIntoRun(st, plan, spec.host_uid, home);
  if (!placed.ok() && st.pid < 0 && zygote != nullptr) {
    std::fprintf(stderr, "sandrund: zygote: %s; the run starts cold\n",
                 placed.error().message.c_str());
    placed = CloneIntoRun(st, plan, spec.host_uid, home);
  }
  if (!placed.ok()) return placed.error();
  CloseChildEnds(st);
  if (Status s = SetUpChildFromParent(st, spec, *placed); !s.ok()) {
    sys::KillPidfd(st.pidfd.get());
    if (st.from_zygote)
      AwaitExit(st.pidfd.get());
    else
      (void)sys::Reap(st.pid);  // reaped: its memory (ours) is no longer used
    st.child_stack.Reset();
    return MakeError(ErrorKind::kSystem, s.error().message, s.error().err);
  }
  if (!st.from_zygote) AwaitChildExec(st);
  util::StampPhase("child_execd");
  return st;
}

// The poll loop's state between rounds.
struct LoopState {
  // Each stream keeps a head and a tail of half the output cap between them.
  LoopState(uint64_t cap, Clock::time_point start)
      : out(cap * 3 / 8, cap / 8),
        err(cap * 3 / 8, cap / 8),
        next_cpu_check(start + kCpuCheckEvery) {}
  util::HeadTailBuffer out, err;  // the captured streams
  bool out_open = true, err_open = true, exited = false;
  bool report_open = true, have_report = false;
  bool abandoned = false;  // the observer's reader went away: killed
  ChildReport report{};    // init's, once have_report
  size_t stdin_written = 0;
  Clock::time_point next_cpu_check;
};

// The fds one round waits on: the streams still open, the pidfd and init's report pipe until
// the run ends, stdin while input is left. An index is -1 for an fd not in the set.
struct PollSet {
  pollfd fds[5] = {};
  nfds_t n = 0;
  int out = -1, err = -1, pid = -1, report = -1, in = -1;
  int Add(int fd, short events) {
    fds[n] = {fd, events, 0};
    return static_cast<int>(n++);
  }
  bool Ready(int i) const { return i >= 0 && fds[i].revents != 0; }
};

PollSet MakePollSet(const Started& st, const LoopState& s) {
  const Pipes& p = st.pipes;
  PollSet set;
  if (s.out_open) set.out = set.Add(p.out.read.get(), POLLIN);
  if (s.err_open) set.err = set.Add(p.err.read.get(), POLLIN);
  if (!s.exited) set.pid = set.Add(st.pidfd.get(), POLLIN);
  if (!s.exited && s.report_open) set.report = set.Add(p.report.read.get(), POLLIN);
  if (p.in.write.valid()) set.in = set.Add(p.in.write.get(), POLLOUT);
  return set;
}

// Until the deadline while the run lives; a second once it has exited (only its streams
// are left to drain). With an observer, at most its tick.
int PollTimeoutMs(bool exited, Clock::time_point deadline, bool observed) {
  const int64_t most = observed ? OutputObserver::kTickMs : 1000;
  if (exited) return static_cast<int>(most);
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  // Wake at least every 100 ms to check the run's CPU time.
  return static_cast<int>(std::max<int64_t>(0, std::min<int64_t>({left, int64_t{100}, most})));
}

// Writes what the pipe takes of the rest of `data`; closes stdin once all of it is written
// or the reader is gone.
void FeedStdin(sys::Pipe& in, const std::string& data, size_t& written) {
  ssize_t w = ::write(in.write.get(), data.data() + written, data.size() - written);
  if (w > 0) written += static_cast<size_t>(w);
  if ((w < 0 && sys::LastErrno() != EAGAIN && sys::LastErrno() != EINTR) ||
      written == data.size()) {
    in.write.Reset();
  }
}

// Reads init's report when it is there. init writes it (one write below PIPE_BUF, so whole or
// not at all, pipe(7)) when the program has ended and then exits; the kernel then tears down
// the sandbox's namespaces (every mount, the pid namespace's leftovers) before the pidfd says
// so, which the report takes off the request path (measured: median 0.3 ms, p90 1.2 ms,
// max 5.7 ms over 123 runs). EOF without a report:
// init was killed; the pidfd tells the end then.
void ReadReport(int fd, LoopState& s) {
  ssize_t got = ::read(fd, &s.report, sizeof s.report);
  if (got == static_cast<ssize_t>(sizeof s.report)) {
    s.have_report = true;
  } else if (got >= 0 || (sys::LastErrno() != EAGAIN && sys::LastErrno() != EINTR)) {
    s.report_open = false;
  }
}

// While the run lives, kills it at the first limit it passes: the output cap, the deadline,
// the CPU time of the run.
void EnforceLimits(Started& st, LoopState& s, RunFacts& f, uint64_t cap,
                   Clock::time_point deadline) {
  if (s.exited) return;
  if (!f.flooded && s.out.total_bytes() + s.err.total_bytes() > cap) {
    f.flooded = true;
    sys::KillPidfd(st.pidfd.get());
  }
  if (!f.timed_out && Clock::now() >= deadline) {
    f.timed_out = true;
    sys::KillPidfd(st.pidfd.get());
  }
  // CPU time of the whole run (all its processes and threads), which RLIMIT_CPU (per
  // process) cannot bound: checked from the cgroup between polls.
  if (!f.cpu_out && st.cgroup && Clock::now() >= s.next_cpu_check) {
    s.next_cpu_check = Clock::now() + kCpuCheckEvery;
    CgroupStats now;
    now.cpu_usage_ms = st.cgroup->CpuUsageMs();
    if (Since(now, st.base).cpu_usage_ms > f.cpu_limit_ms) {
      f.cpu_out = true;
      sys::KillPidfd(st.pidfd.get());
    }
  }
}

// After the loop: closes stdin, reads init's report and hands over the captured streams.
void FinishSupervision(Started& st, const LoopState& s, Supervised& seen) {
  st.pipes.in.write.Reset();
  seen.report = s.report;
  seen.facts.have_report = s.have_report;
  if (!s.have_report) {
    // Ended by the pidfd: the report (if any) is in the pipe now, init wrote it before exiting.
    ssize_t got = ::read(st.pipes.report.read.get(), &seen.report, sizeof seen.report);
    seen.facts.have_report = got == static_cast<ssize_t>(sizeof seen.report);
  }
  seen.stdout_text = s.out.Text();
  seen.stderr_text = s.err.Text();
  seen.stdout_truncated = s.out.truncated();
  seen.stderr_truncated = s.err.truncated();
}

// The I/O loop: feeds stdin, captures both streams with a shared byte cap, watches the
// deadline, the output cap and the cgroup's CPU time; kills the run when one is passed.
Supervised Supervise(Started& st, const SandboxSpec& spec) {
  Pipes& p = st.pipes;
  Supervised seen;
  RunFacts& f = seen.facts;
  const uint64_t cap = spec.limits.output_bytes;
  LoopState s(cap, st.start);
  for (int fd : {p.out.read.get(), p.err.read.get(), p.in.write.get(), p.report.read.get()}) {
    (void)sys::SetNonBlocking(fd);
  }
  if (spec.stdin_data.empty()) p.in.write.Reset();
  f.cpu_limit_ms = spec.limits.cpu_time_s * 1000;
  const auto deadline = st.start + std::chrono::milliseconds(spec.limits.wall_time_ms);
  while (s.out_open || s.err_open || !s.exited) {
    PollSet set = MakePollSet(st, s);
    int ready = ::poll(set.fds, set.n, PollTimeoutMs(s.exited, deadline, spec.observer));
    if (ready < 0 && sys::LastErrno() != EINTR) break;
    if (set.Ready(set.out)) s.out_open = Drain(p.out.read.get(), s.out, spec.observer, 1);
    if (set.Ready(set.err)) s.err_open = Drain(p.err.read.get(), s.err, spec.observer, 2);
    if (set.Ready(set.in)) FeedStdin(p.in, spec.stdin_data, s.stdin_written);
    if (set.Ready(set.report)) ReadReport(p.report.read.get(), s);
    if (!s.exited && (set.Ready(set.pid) || s.have_report)) {
      s.exited = true;
      util::StampPhase("exited");
    }
    EnforceLimits(st, s, f, cap, deadline);
    if (spec.observer && !spec.observer->Tick() && !s.abandoned) {
      s.abandoned = true;  // nobody waits for the run: it ends now
      sys::KillPidfd(st.pidfd.get());
    }
    // Writers gone yet no EOF: give up.
    if (s.exited && (s.out_open || s.err_open) && ready == 0) break;
  }
  FinishSupervision(st, s, seen);
  return seen;
}

// "sandbox setup failed at STEP (mount step): strerror" from init's report.
std::string SetupFailure(const ChildReport& report, const MountPlan& mounts) {
  std::string step = ChildStepName(report.step);
  if (report.step == ChildStep::kMountStep && report.detail >= 0 &&
      static_cast<size_t>(report.detail) < mounts.descriptions.size()) {
    step += " (" + mounts.descriptions[static_cast<size_t>(report.detail)] + ")";
  }
  return "sandbox setup failed at " + step + ": " + sys::ErrnoMessage(report.err);
}

}  // namespace

Result<std::unique_ptr<RunCgroup>> Launcher::CreateCgroup(const std::string& run_id,
                                                          const CgroupLimits& limits) const {
  if (!cgroups_) return std::unique_ptr<RunCgroup>();
  auto created = cgroups_->Create(run_id, limits);
  if (!created.ok()) return MakeError(ErrorKind::kSystem, "cgroup: " + created.error().message);
  util::StampPhase("cgroup_made");
  return created;
}

namespace {

// The run's result from what supervision saw: the setup failure as an error, else the
// outcome, usage and streams. init is reaped here, or, when it reported and a cgroup measures
// the run (CPU time, peak memory), left exiting to the cgroup (RunCgroup::ReapLater).
Result<SandboxResult> Conclude(Started& st, Supervised& seen, const MountPlan& mounts) {
  // The cgroup stays: the caller runs the next step in it, then removes it.
  const CgroupStats stats = st.cgroup ? Since(st.cgroup->Stats(), st.base) : CgroupStats{};
  std::optional<sys::ExitInfo> reaped;  // none when left to the cgroup
  if (seen.facts.have_report && st.cgroup && stats.cpu_usage_ms >= 0 && stats.peak_memory_kb >= 0) {
    if (!st.from_zygote) st.cgroup->ReapLater(st.pid);
  } else if (st.from_zygote) {
    AwaitExit(st.pidfd.get());
  } else if (auto exit = sys::Reap(st.pid); exit.ok()) {
    reaped = *exit;
  }
  const auto end = Clock::now();
  util::StampPhase("reaped");

  const ChildReport& report = seen.report;
  if (seen.facts.have_report && report.kind == ChildReport::kSetupFailed) {
    return MakeError(ErrorKind::kSystem, SetupFailure(report, mounts), report.err);
  }

  SandboxResult result;
  result.wall_ms = std::chrono::duration_cast<std::chrono::milliseconds>(end - st.start).count();
  if (reaped) {
    const rusage& ru = reaped->usage;
    result.cpu_ms = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
                    (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
    result.max_rss_kb = ru.ru_maxrss;
  }
  if (stats.cpu_usage_ms >= 0) result.cpu_ms = stats.cpu_usage_ms;
  if (stats.peak_memory_kb >= 0) result.max_rss_kb = stats.peak_memory_kb;
  result.process_limit_hits = stats.pids_limit_hits;
  if (st.network) {
    const CounterBytes bytes = st.network->Usage();
    result.net_rx_bytes = bytes.rx;
    result.net_tx_bytes = bytes.tx;
    st.network.reset();
  }
  result.stdout_text = std::move(seen.stdout_text);
  result.stderr_text = std::move(seen.stderr_text);
  result.stdout_truncated = seen.stdout_truncated;
  result.stderr_truncated = seen.stderr_truncated;

  RunFacts facts = seen.facts;
  facts.oom_kills = stats.oom_kills;
  facts.wait_status = facts.have_report ? report.wait_status : 0;
  facts.cpu_ms = result.cpu_ms;
  const int ws = facts.wait_status;
  if (facts.have_report && WIFEXITED(ws)) result.exit_code = WEXITSTATUS(ws);
  if (facts.have_report && WIFSIGNALED(ws)) result.signal = WTERMSIG(ws);
  result.outcome = ClassifyOutcome(facts);
  if (!facts.have_report && result.outcome == RunOutcome::kSignaled) result.signal = SIGKILL;
  return result;
}

// After a run: the network namespace the pool made ahead for it goes back to the pool with
// the run's owner and a pidfd of its init, to be checked and kept for that owner's next run
// (net_namespace_pool.h). Without an owner it goes.
void GiveBackNetNamespace(Started& st, const SandboxSpec& spec, NetNamespacePool& nets) {
  if (!st.netns.valid() || spec.net_owner.empty() || !st.pidfd.valid()) return;
  sys::UniqueFd run_end(::fcntl(st.pidfd.get(), F_DUPFD_CLOEXEC, 0));
  nets.Return(std::move(st.netns), spec.net_owner, std::move(run_end));
}

}  // namespace

Result<SandboxResult> Launcher::Run(const SandboxSpec& spec, RunCgroup* cgroup) const {
  if (spec.argv.empty() || spec.argv[0].empty() || spec.argv[0][0] != '/') {
    return MakeError(ErrorKind::kSystem, "argv[0] must be an absolute path inside the sandbox");
  }
  util::StampPhase("launch");
  MountPlan mounts = BuildMountPlan(spec, root_template_);
  auto started = sandbox::Start(spec, mounts, filter_, cgroup, init_exe_.get(), &net_namespaces_,
                                user_sysctls_, ZygoteFor(spec));
  if (!started.ok()) return started.error();
  Supervised seen = Supervise(*started, spec);
  auto result = Conclude(*started, seen, mounts);
  GiveBackNetNamespace(*started, spec, net_namespaces_);
  return result;
}

namespace {

// How long a waiting sandbox may take to come up (setup and the interpreter's start).
constexpr int kWarmReadyTimeoutMs = 30000;

// Reads the one byte a waiting program writes when it is ready (kWarmReadyByte), from its
// stdout pipe, within `timeout_ms`. Errors: EOF (it ended), timeout, another byte.
Status AwaitReadyByte(Started& st, int timeout_ms) {
  pollfd p{st.pipes.out.read.get(), POLLIN, 0};
  const int ready = ::poll(&p, 1, timeout_ms);
  if (ready == 0) {
    return MakeError(ErrorKind::kSystem,
                     "waiting sandbox not ready within " + std::to_string(timeout_ms) + " ms");
  }
  char byte = 0;
  if (ready < 0 || ::read(st.pipes.out.read.get(), &byte, 1) != 1) {
    return MakeError(ErrorKind::kSystem, "waiting sandbox ended before it was ready");
  }
  if (byte != kWarmReadyByte) {
    return MakeError(ErrorKind::kSystem, "waiting sandbox wrote something else than ready");
  }
  return OkStatus();
}

}  // namespace

struct WaitingSandbox::State {
  Started st;
  MountPlan mounts;
  bool used = false;
  bool reaped = false;
  std::string exit_description;
};

WaitingSandbox::WaitingSandbox(std::unique_ptr<State> state) : state_(std::move(state)) {}

WaitingSandbox::~WaitingSandbox() {
  State& s = *state_;
  if (!s.used && !s.reaped) {
    // init's death takes every process of its pid namespace with it.
    sys::KillPidfd(s.st.pidfd.get());
    (void)sys::Reap(s.st.pid);
  }
}

bool WaitingSandbox::Exited() const {
  if (state_->reaped || state_->used) return true;
  pollfd p{state_->st.pidfd.get(), POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

bool WaitingSandbox::used() const { return state_->used; }

std::string WaitingSandbox::ExitDescription() {
  State& s = *state_;
  if (s.used || !Exited()) return "";
  if (!s.reaped) {
    auto reaped = sys::Reap(s.st.pid);
    s.reaped = true;
    ChildReport report{};
    (void)sys::SetNonBlocking(s.st.pipes.report.read.get());
    const bool have = ::read(s.st.pipes.report.read.get(), &report, sizeof report) ==
                      static_cast<ssize_t>(sizeof report);
    if (have && report.kind == ChildReport::kSetupFailed) {
      s.exit_description = SetupFailure(report, s.mounts);
    } else if (have) {
      s.exit_description =
          "ended while waiting (wait status " + std::to_string(report.wait_status) + ")";
    } else {
      s.exit_description = "killed while waiting";
    }
  }
  return s.exit_description;
}

Result<std::unique_ptr<WaitingSandbox>> Launcher::StartWaiting(const SandboxSpec& spec,
                                                               RunCgroup* cgroup) const {
  if (spec.argv.empty() || spec.argv[0].empty() || spec.argv[0][0] != '/') {
    return MakeError(ErrorKind::kSystem, "argv[0] must be an absolute path inside the sandbox");
  }
  auto state = std::make_unique<WaitingSandbox::State>();
  state->mounts = BuildMountPlan(spec, root_template_);
  auto started = sandbox::Start(spec, state->mounts, filter_, cgroup, init_exe_.get(),
                                &net_namespaces_, user_sysctls_, ZygoteFor(spec));
  if (!started.ok()) return started.error();
  state->st = std::move(*started);
  auto waiting = std::make_unique<WaitingSandbox>(std::move(state));
  // Ready means set up: its mounts made (they use the host paths of its directory, which the
  // run that takes it renames) and the program waiting for its start line, which it says by
  // writing kWarmReadyByte on stdout first. Until then it is not handed out.
  if (Status ready = AwaitReadyByte(waiting->state_->st, kWarmReadyTimeoutMs); !ready.ok()) {
    const std::string why = waiting->Exited() ? waiting->ExitDescription() : "";
    return MakeError(ErrorKind::kSystem,
                     ready.error().message + (why.empty() ? "" : " (" + why + ")"));
  }
  return waiting;
}

Result<SandboxResult> Launcher::RunWaiting(WaitingSandbox& sandbox, const std::string& start_line,
                                           const SandboxSpec& spec) const {
  WaitingSandbox::State& s = *sandbox.state_;
  if (s.used || sandbox.Exited()) {
    return MakeError(ErrorKind::kSystem, "the waiting sandbox has ended or served a run already");
  }
  s.used = true;
  Started& st = s.st;
  util::StampPhase("launch");
  if (st.cgroup) {
    if (Status set = st.cgroup->SetLimits(spec.limits.cgroup); !set.ok()) {
      sys::KillPidfd(st.pidfd.get());
      (void)sys::Reap(st.pid);
      return MakeError(ErrorKind::kSystem, "cgroup: " + set.error().message, set.error().err);
    }
    st.base = st.cgroup->BaseStats();
  }
  st.start = Clock::now();
  SandboxSpec run = spec;
  run.stdin_data = start_line + spec.stdin_data;
  Supervised seen = Supervise(st, run);
  auto result = Conclude(st, seen, s.mounts);
  GiveBackNetNamespace(st, spec, net_namespaces_);
  return result;
}

Result<HelperResult> Launcher::RunHelper(const std::vector<std::string>& argv,
                                         RunCgroup* cgroup) const {
  sys::Pipe out, err, sync;
  for (sys::Pipe* pipe : {&out, &err, &sync}) {
    auto made = sys::MakePipe();
    if (!made.ok()) return made.error();
    *pipe = std::move(*made);
  }
  if (cgroup) cgroup->ReapExiting();
  const CgroupStats base = cgroup ? cgroup->BaseStats() : CgroupStats{};
  auto pid = sys::Spawn(argv, out.write.get(), err.write.get(), sync.read.get());
  if (!pid.ok()) return MakeError(ErrorKind::kSystem, pid.error().message);
  out.write.Reset();
  err.write.Reset();
  sync.read.Reset();
  if (cgroup) {
    if (Status s = cgroup->AddProcess(*pid); !s.ok()) {
      sys::KillPid(*pid);
      (void)sys::Reap(*pid);
      return MakeError(ErrorKind::kSystem, s.error().message);
    }
  }
  (void)sys::WriteAll(sync.write.get(), "G", 1);
  sync.write.Reset();
  HelperResult result;
  (void)sys::SetNonBlocking(out.read.get());
  (void)sys::SetNonBlocking(err.read.get());
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    pollfd fds[2] = {{out.read.get(), static_cast<short>(out_open ? POLLIN : 0), 0},
                     {err.read.get(), static_cast<short>(err_open ? POLLIN : 0), 0}};
    if (::poll(fds, 2, -1) < 0 && sys::LastErrno() != EINTR) break;
    if (out_open && fds[0].revents) {
      out_open = DrainString(out.read.get(), result.stdout_text, 64u << 20);
    }
    if (err_open && fds[1].revents) {
      err_open = DrainString(err.read.get(), result.stderr_text, 64u << 10);
    }
  }
  auto reaped = sys::Reap(*pid);
  if (reaped.ok()) result.wait_status = reaped->wait_status;
  // The cgroup stays, with the pages the helper wrote charged to it: the run goes on in it.
  if (cgroup) result.memory_limit = Since(cgroup->Stats(), base).oom_kills > 0;
  return result;
}

struct LiveSandbox::State {
  std::unique_ptr<RunCgroup> cgroup;  // st.cgroup; removed by Kill()
  Started st;
  MountPlan mounts;
  uint64_t output_cap = 0;
  bool reaped = false;
  ChildReport report{};
  bool have_report = false;
  int wait_status = 0;
};

LiveSandbox::LiveSandbox(std::unique_ptr<State> state) : state_(std::move(state)) {}

LiveSandbox::~LiveSandbox() { Kill(); }

bool LiveSandbox::Exited() const {
  if (state_->reaped) return true;
  pollfd p{state_->st.pidfd.get(), POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

int LiveSandbox::pidfd() const { return state_->st.pidfd.get(); }

CgroupStats LiveSandbox::Stats() const {
  return state_->cgroup ? state_->cgroup->Stats() : CgroupStats{};
}

CounterBytes LiveSandbox::NetworkUsage() const {
  return state_->st.network ? state_->st.network->Usage() : CounterBytes{};
}

std::string LiveSandbox::DrainOutput() {
  std::string text;
  for (sys::UniqueFd* fd : {&state_->st.pipes.out.read, &state_->st.pipes.err.read}) {
    if (fd->valid() && !DrainString(fd->get(), text, state_->output_cap)) fd->Reset();
  }
  return text;
}

namespace {

// Waits for init (blocking) and reads its report, once.
void ReapInit(LiveSandbox::State& s) {
  if (s.reaped) return;
  (void)sys::Reap(s.st.pid);
  // init wrote its report (if any) before exiting.
  ssize_t got = ::read(s.st.pipes.report.read.get(), &s.report, sizeof s.report);
  s.have_report = got == static_cast<ssize_t>(sizeof s.report);
  s.reaped = true;
}

}  // namespace

std::string LiveSandbox::ExitDescription() {
  State& s = *state_;
  if (!Exited()) return "";
  ReapInit(s);
  if (!s.have_report) return "killed";
  if (s.report.kind == ChildReport::kSetupFailed) return SetupFailure(s.report, s.mounts);
  const int ws = s.report.wait_status;
  if (WIFEXITED(ws)) return "exited with code " + std::to_string(WEXITSTATUS(ws));
  if (WIFSIGNALED(ws)) return "killed by signal " + std::to_string(WTERMSIG(ws));
  return "ended";
}

RunCgroup* LiveSandbox::cgroup() const { return state_->cgroup.get(); }

Status LiveSandbox::Freeze(bool frozen) {
  if (!state_->cgroup) return MakeError(ErrorKind::kSystem, "the sandbox has no cgroup to freeze");
  return state_->cgroup->Freeze(frozen);
}

void LiveSandbox::Kill() {
  State& s = *state_;
  if (!s.reaped) {
    sys::KillPidfd(s.st.pidfd.get());
    // A frozen init takes its SIGKILL only once thawed (cgroup v1).
    if (s.cgroup) (void)s.cgroup->Freeze(false);
    ReapInit(s);  // init's death takes every process of its pid namespace with it
  }
  s.st.pipes.lifeline.write.Reset();
  s.st.network.reset();  // sandrun-slirp ends with its sandbox
  if (s.cgroup) {
    (void)s.cgroup->Destroy();
    s.cgroup.reset();
    s.st.cgroup = nullptr;
  }
}

Result<std::unique_ptr<LiveSandbox>> Launcher::Start(const SandboxSpec& spec,
                                                     std::unique_ptr<RunCgroup> cgroup) const {
  if (spec.argv.empty() || spec.argv[0].empty() || spec.argv[0][0] != '/') {
    return MakeError(ErrorKind::kSystem, "argv[0] must be an absolute path inside the sandbox");
  }
  auto state = std::make_unique<LiveSandbox::State>();
  state->cgroup = std::move(cgroup);
  state->mounts = BuildMountPlan(spec, root_template_);
  state->output_cap = spec.limits.output_bytes;
  auto started = sandbox::Start(spec, state->mounts, filter_, state->cgroup.get(), init_exe_.get(),
                                &net_namespaces_, user_sysctls_, ZygoteFor(spec));
  if (!started.ok()) return started.error();
  state->st = std::move(*started);
  Pipes& p = state->st.pipes;
  p.in.write.Reset();  // stdin: EOF
  for (int fd : {p.out.read.get(), p.err.read.get(), p.report.read.get()}) {
    (void)sys::SetNonBlocking(fd);
  }
  return std::make_unique<LiveSandbox>(std::move(state));
}

}  // namespace sandrun::sandbox
