// _sandrun_zygote: the C side of the zygote (sandrun_zygote.py), a CPython extension module.
// The zygote is a Python started once, as a run's Python starts (site, sitecustomize, the
// loader), single-threaded, host root. serve() takes one request of the daemon (zygote.h) and
// builds that run's sandbox with the launcher's own code: clone(2) into new namespaces as
// launcher.cc CloneChild does, then child.h ChildSetUp (fds, sync byte, mounts, pivot_root),
// the user limits, a fork of the program, whose process takes init_program.h PrepareProgram
// (ids, capabilities, rlimits, seccomp) and returns into Python as the run's Python, while
// its parent execs sandrun-init to supervise it (init_main.cc --supervise).
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <fcntl.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "sandbox/child.h"
#include "sandbox/init_plan.h"
#include "sandbox/init_program.h"
#include "sys/syscalls.h"

namespace sandrun::sandbox {
namespace {

// The fds of one request, in this order (SCM_RIGHTS); the network namespace only when the
// request has no new_net.
enum RequestFd { kIn, kOut, kErr, kReport, kSync, kPlan, kLifeline, kInitExe, kNetns, kMaxFds };
constexpr size_t kMaxRequestBytes = 8 << 20;

int home_netns = -1;

struct Received {
  std::string bytes;
  std::vector<int> fds;
};

// The receive buffer: mapped once and left untouched but for the pages a request writes (a
// request is ~1.2 KB: its mount steps and paths). Every page the zygote has is copied into
// each run's page tables at the program's fork and unmapped at its exit: a buffer written
// through at its construction (a std::vector of 8 MiB, until 2026-12-07) was 8 of the
// zygote's 13 MiB of anonymous memory.
char* ReceiveBuffer() {
  static void* const buffer = ::mmap(nullptr, kMaxRequestBytes, PROT_READ | PROT_WRITE,
                                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return buffer == MAP_FAILED ? nullptr : static_cast<char*>(buffer);
}

// One message; false at EOF (the daemon is gone) or on an error.
bool Receive(int sock, Received& got) {
  char* const buffer = ReceiveBuffer();
  if (buffer == nullptr) return false;  // the daemon then starts its runs cold
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  iovec iov{buffer, kMaxRequestBytes};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && sys::LastErrno() == EINTR);
  if (n <= 0) return false;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const int* fds = reinterpret_cast<const int*>(CMSG_DATA(c));
    got.fds.assign(fds, fds + count);
  }
  got.bytes.assign(buffer, static_cast<size_t>(n));
  return (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == 0;
}

void Reply(int sock, pid_t pid, int err, int pidfd) {
  int32_t body[2] = {pid, err};
  iovec iov{body, sizeof body};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (pidfd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pidfd, sizeof pidfd);
  }
  while (::sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 && sys::LastErrno() == EINTR) {
  }
}

// The request's mount steps as the child runs them, pointing into `request`.
std::vector<MountStep> Steps(const ZygoteRequest& request) {
  std::vector<MountStep> steps;
  for (const auto& s : request.steps) {
    steps.push_back(MountStep{static_cast<MountOp>(s.op), s.has_source ? s.source.c_str() : nullptr,
                              s.target.c_str(), static_cast<unsigned long>(s.flags),
                              s.has_data ? s.data.c_str() : nullptr, s.data.size()});
  }
  return steps;
}

PyObject* StringList(const std::vector<std::string>& in) {
  PyObject* list = PyList_New(0);
  for (const auto& s : in) {
    PyObject* item = PyUnicode_DecodeFSDefaultAndSize(s.data(), static_cast<Py_ssize_t>(s.size()));
    if (item == nullptr) return nullptr;
    PyList_Append(list, item);
    Py_DECREF(item);
  }
  return list;
}

// The program's process (a fork of the clone child, so a copy of the zygote's memory as it
// was at the request): the user limits (it is still the namespace's root), PrepareProgram,
// then the run's Python: `callback(argv, environ)`, which ends the process itself.
[[noreturn]] void ProgramSide(PyObject* callback) {
  auto init_plan = DecodeInitPlan(ReadPlanBytes());
  if (!init_plan.ok()) InitFail(ChildStep::kInitPlan, 0, EINVAL);
  WriteUserSysctls(*init_plan);
  // The zygote's dispositions are a fresh Python's (SIGPIPE and SIGXFSZ ignored, SIGINT
  // Python's handler): kept, as a started interpreter has them.
  PrepareProgram(*init_plan, /*reset_signals=*/false);
  for (int fd : {kInitReportFd, 4, kInitExeFd, 8}) ::close(fd);
  PyOS_AfterFork_Child();
  PyObject* result = PyObject_CallFunction(callback, "(NN)", StringList(init_plan->argv),
                                           StringList(init_plan->envp));
  if (result == nullptr) PyErr_Print();
  ::_exit(1);  // the callback ends the process; reaching here is a failure
}

struct CloneArgs {
  const ChildPlan* plan;
  PyObject* callback;
};

// The clone child, pid 1 of the new pid namespace, in the zygote's memory (CLONE_VM) until
// its execve, on its own stack; the zygote waits for that execve (exec-notify pipe). It
// allocates nothing (the zygote's heap is shared): the root, the program's fork, then
// sandrun-init over this process.
int ChildEntry(void* arg) {
  const CloneArgs& args = *static_cast<const CloneArgs*>(arg);
  ::signal(SIGCHLD, SIG_DFL);  // the zygote ignores it; init waits for its children
  ChildSetUp(*args.plan);
  // Its id change made it non-dumpable, its /proc/self owned by host root, which the namespace
  // cannot map (oom_score_adj would refuse the write): dumpable as after an execve.
  ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  sigset_t chld;
  ::sigemptyset(&chld);
  ::sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  const pid_t program = ::fork();
  if (program < 0) InitFail(ChildStep::kFork, 0);
  if (program == 0) ProgramSide(args.callback);
  char pid[16];
  int n = 0;
  char digits[16];
  for (pid_t v = program; v > 0; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
  for (int i = 0; i < n; ++i) pid[i] = digits[n - 1 - i];
  pid[n] = 0;
  const char* argv[] = {"sandrun-init", "--supervise", pid, nullptr};
  static const char* const kEnv[] = {nullptr};
  ::syscall(SYS_execveat, kInitExeFd, "", argv, kEnv, AT_EMPTY_PATH);
  InitFail(ChildStep::kExecInit, 0);
}

// Waits for EOF on `fd`: the clone child exec'd or died and no longer uses this memory.
void AwaitExec(int fd) {
  char byte;
  while (::read(fd, &byte, 1) != 0 && sys::LastErrno() == EINTR) {
  }
}

constexpr size_t kChildStackBytes = 8 << 20;  // the program's Python runs on its copy

void CloseAll(const std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
}

// serve(sock, callback) -> False at the daemon's EOF, else None after a request; in the
// program of the sandbox it built, callback(argv, environ) runs instead (and ends it).
PyObject* Serve(PyObject*, PyObject* args) {
  int sock = -1;
  PyObject* callback = nullptr;
  if (!PyArg_ParseTuple(args, "iO", &sock, &callback)) return nullptr;
  Received got;
  if (!Receive(sock, got)) {
    CloseAll(got.fds);
    Py_RETURN_FALSE;
  }
  auto request = DecodeZygoteRequest(got.bytes);
  const size_t want = request.ok() && !request->new_net ? kMaxFds : kNetns;
  if (!request.ok() || got.fds.size() != want) {
    CloseAll(got.fds);
    Reply(sock, -1, EINVAL, -1);
    Py_RETURN_NONE;
  }
  std::vector<MountStep> steps = Steps(*request);
  ChildPlan plan{};
  plan.stdin_fd = got.fds[kIn];
  plan.stdout_fd = got.fds[kOut];
  plan.stderr_fd = got.fds[kErr];
  plan.report_fd = got.fds[kReport];
  plan.sync_fd = got.fds[kSync];
  plan.plan_fd = got.fds[kPlan];
  plan.lifeline_fd = got.fds[kLifeline];
  plan.init_exe_fd = got.fds[kInitExe];
  int notify[2];
  if (::pipe2(notify, O_CLOEXEC) != 0) {
    CloseAll(got.fds);
    Reply(sock, -1, sys::LastErrno(), -1);
    Py_RETURN_NONE;
  }
  plan.exec_notify_fd = notify[1];
  plan.root_dir = request->root_dir.c_str();
  plan.put_old = request->put_old.c_str();
  plan.old_root_inside = "/.oldroot";
  plan.mount_steps = steps.data();
  plan.mount_step_count = steps.size();
  plan.hostname = request->hostname.c_str();

  unsigned long flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS |
                        CLONE_PIDFD | SIGCHLD;
  if (request->new_net) {
    flags |= CLONE_NEWNET;
  } else if (::setns(got.fds[kNetns], CLONE_NEWNET) != 0) {
    flags |= CLONE_NEWNET;  // as the launcher: a new one instead
  }
  int pidfd = -1;
  // The user namespace is owned by the sandbox's host uid (launcher.cc CloneChild).
  const bool as_owner = ::syscall(SYS_setresuid, -1, request->owner_uid, -1) == 0;
  void* stack = ::mmap(nullptr, kChildStackBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  CloneArgs clone_args{&plan, callback};
  PyOS_BeforeFork();
  const long pid = as_owner && stack != MAP_FAILED
                       ? ::clone(ChildEntry, static_cast<char*>(stack) + kChildStackBytes,
                                 static_cast<int>(flags | CLONE_VM), &clone_args, &pidfd)
                       : -1;
  const int clone_errno = as_owner ? sys::LastErrno() : EPERM;
  ::close(notify[1]);
  if (::syscall(SYS_setresuid, -1, 0, -1) != 0) ::_exit(70);
  if ((flags & CLONE_NEWNET) == 0 || !request->new_net) ::setns(home_netns, CLONE_NEWNET);
  CloseAll(got.fds);
  Reply(sock, pid > 0 ? static_cast<pid_t>(pid) : -1, pid > 0 ? 0 : clone_errno, pidfd);
  if (pidfd >= 0) ::close(pidfd);
  if (pid > 0) AwaitExec(notify[0]);
  ::close(notify[0]);
  PyOS_AfterFork_Parent();
  if (stack != MAP_FAILED) ::munmap(stack, kChildStackBytes);
  Py_RETURN_NONE;
}

// watch_parent(pid): dies with the daemon (PR_SET_PDEATHSIG; at once if it is gone already).
PyObject* WatchParent(PyObject*, PyObject* args) {
  int daemon = -1;
  if (!PyArg_ParseTuple(args, "i", &daemon)) return nullptr;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (::getppid() != daemon) ::_exit(0);
  // glibc's two internal signals (32, 33), which posix_spawn cannot reset: ignored from the
  // daemon otherwise, and so in every run (a fresh Python has them at the default).
  struct kernel_sigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)();
    uint64_t mask;
  } dfl{SIG_DFL, 0, nullptr, 0};
  for (int sig : {32, 33}) ::syscall(SYS_rt_sigaction, sig, &dfl, nullptr, sizeof dfl.mask);
  Py_RETURN_NONE;
}

// trim(): gives the heap's free pages back (malloc_trim), so no fork copies them.
PyObject* Trim(PyObject*, PyObject*) {
  ::malloc_trim(0);
  Py_RETURN_NONE;
}

PyMethodDef kMethods[] = {
    {"trim", Trim, METH_NOARGS, "Give the heap's free pages back."},
    {"watch_parent", WatchParent, METH_VARARGS, "Die with the daemon."},
    {"serve", Serve, METH_VARARGS, "Serve one request of the daemon (sandrun zygote)."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT,
                       "_sandrun_zygote",
                       nullptr,
                       -1,
                       kMethods,
                       nullptr,
                       nullptr,
                       nullptr,
                       nullptr};

}  // namespace
}  // namespace sandrun::sandbox

PyMODINIT_FUNC PyInit__sandrun_zygote() {
  using namespace sandrun::sandbox;
  home_netns = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (home_netns < 0) return PyErr_SetFromErrno(PyExc_OSError);
  return PyModule_Create(&kModule);
}
