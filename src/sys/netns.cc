#include "sys/netns.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <ifaddrs.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "sys/syscalls.h"

namespace sandrun::sys {
namespace {

// Steps of SpawnAs's child, reported with errno through the error pipe.
enum SpawnStep : int { kGroups = 1, kGid, kUid, kDeathSignal, kFdLimit, kFds, kExec };

const char* SpawnStepName(int step) {
  switch (step) {
    case kGroups:
      return "setgroups";
    case kGid:
      return "setresgid";
    case kUid:
      return "setresuid";
    case kDeathSignal:
      return "prctl(PR_SET_PDEATHSIG)";
    case kFdLimit:
      return "setrlimit(RLIMIT_NOFILE)";
    case kFds:
      return "arrange fds";
    case kExec:
      return "execve";
  }
  return "?";
}

[[noreturn]] void ChildFail(int error_fd, int step) {
  int record[2] = {step, errno};
  WriteAll(error_fd, record, sizeof record);
  ::_exit(127);
}

constexpr size_t kMaxFds = 12;  // SpawnAs's fds

// SpawnAs's child, first: the fd limit, uid:gid and PDEATHSIG. Async-signal-safe; on
// failure it _exits through ChildFail.
void ChildSetUp(int error_fd, uid_t uid, gid_t gid, pid_t parent, rlim_t max_fds) {
  const rlimit fds_limit{max_fds, max_fds};
  if (::setrlimit(RLIMIT_NOFILE, &fds_limit) != 0) ChildFail(error_fd, kFdLimit);
  if (::setgroups(0, nullptr) != 0) ChildFail(error_fd, kGroups);
  if (::setresgid(gid, gid, gid) != 0) ChildFail(error_fd, kGid);
  if (::setresuid(uid, uid, uid) != 0) ChildFail(error_fd, kUid);
  // After the credential change, which clears it (prctl(2)); a parent gone before this
  // line is seen by getppid.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || ::getppid() != parent) {
    ChildFail(error_fd, kDeathSignal);
  }
}

// SpawnAs's child, then: fds[i] at 3 + i, /dev/null at 0, log_fd at 1 and 2,
// everything else closed but the error pipe (close-on-exec), and execve with no
// environment. Async-signal-safe (fds is only read); never returns.
[[noreturn]] void ChildExec(char* const* args, const std::vector<int>& fds, int null_fd, int log_fd,
                            int error_fd) {
  char* no_env[] = {nullptr};
  // Sources first above every target, so no dup2 overwrites one not yet moved.
  int moved[kMaxFds];
  const size_t n = fds.size();
  const int high = 3 + static_cast<int>(n) + 3;
  for (size_t i = 0; i < n; ++i) {
    moved[i] = ::fcntl(fds[i], F_DUPFD, high);
    if (moved[i] < 0) ChildFail(error_fd, kFds);
  }
  const int err_high = ::fcntl(error_fd, F_DUPFD_CLOEXEC, high);
  if (err_high < 0 || ::dup2(null_fd, 0) < 0 || ::dup2(log_fd, 1) < 0 || ::dup2(log_fd, 2) < 0) {
    ChildFail(error_fd, kFds);
  }
  for (size_t i = 0; i < n; ++i) {
    if (::dup2(moved[i], 3 + static_cast<int>(i)) < 0) ChildFail(err_high, kFds);
  }
  // Close everything else but the error pipe (close-on-exec: gone at execve).
  const unsigned first = 3u + static_cast<unsigned>(n);
  if (static_cast<unsigned>(err_high) > first) {
    ::syscall(SYS_close_range, first, static_cast<unsigned>(err_high) - 1, 0u);
  }
  ::syscall(SYS_close_range, static_cast<unsigned>(err_high) + 1, ~0u, 0u);
  ::execve(args[0], args, no_env);
  ChildFail(err_high, kExec);
}

}  // namespace

Result<UniqueFd> OpenNamespace(pid_t pid, const std::string& kind) {
  const std::string path = "/proc/" + std::to_string(pid) + "/ns/" + kind;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError("open " + path);
  return fd;
}

Result<UniqueFd> OpenThreadNetNamespace() {
  UniqueFd fd(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError("open /proc/thread-self/ns/net");
  return fd;
}

Status EnterNetNamespace(int fd) {
  if (::setns(fd, CLONE_NEWNET) != 0) return ErrnoError("setns(CLONE_NEWNET)");
  return OkStatus();
}

namespace {

// Sets (or clears) IFF_UP on `name` in the calling thread's network namespace
// (netdevice(7)).
Status SetUp(const char* name, bool up) {
  UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock.valid()) return ErrnoError("socket(AF_INET)");
  ifreq request{};
  std::strncpy(request.ifr_name, name, IFNAMSIZ - 1);
  if (::ioctl(sock.get(), SIOCGIFFLAGS, &request) != 0) {
    return ErrnoError(std::string("SIOCGIFFLAGS ") + name);
  }
  request.ifr_flags =
      static_cast<short>(up ? request.ifr_flags | IFF_UP : request.ifr_flags & ~IFF_UP);
  if (::ioctl(sock.get(), SIOCSIFFLAGS, &request) != 0) {
    return ErrnoError(std::string("SIOCSIFFLAGS ") + name + (up ? " up" : " down"));
  }
  return OkStatus();
}

Status BringUp(const char* name) { return SetUp(name, true); }

sockaddr IPv4(const char* text) {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  ::inet_pton(AF_INET, text, &in.sin_addr);
  sockaddr out{};
  std::memcpy(&out, &in, sizeof in);
  return out;
}

// TapInNamespace's part inside the namespace: the tap device, its MTU, address and netmask,
// up, lo up, and the default route through `gateway` (netdevice(7), route(8)'s ioctl).
Result<UniqueFd> MakeTapHere(const TapConfig& c) {
  UniqueFd tun(::open("/dev/net/tun", O_RDWR | O_CLOEXEC));
  if (!tun.valid()) return ErrnoError("open /dev/net/tun");
  ifreq request{};
  std::strncpy(request.ifr_name, c.name, IFNAMSIZ - 1);
  request.ifr_flags = IFF_TAP | IFF_NO_PI;
  if (::ioctl(tun.get(), TUNSETIFF, &request) != 0) return ErrnoError("TUNSETIFF");
  UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock.valid()) return ErrnoError("socket(AF_INET)");
  request.ifr_mtu = c.mtu;
  if (::ioctl(sock.get(), SIOCSIFMTU, &request) != 0) return ErrnoError("SIOCSIFMTU");
  request.ifr_addr = IPv4(c.address);
  if (::ioctl(sock.get(), SIOCSIFADDR, &request) != 0) return ErrnoError("SIOCSIFADDR");
  request.ifr_netmask = IPv4(c.netmask);
  if (::ioctl(sock.get(), SIOCSIFNETMASK, &request) != 0) return ErrnoError("SIOCSIFNETMASK");
  if (Status s = BringUp(c.name); !s.ok()) return s.error();
  // The namespace's own loopback too (a new namespace has it down): the run's 127.0.0.1, and
  // the path of the firewall's ICMP answers to the run's own sockets.
  if (Status s = BringUp("lo"); !s.ok()) return s.error();
  rtentry route{};
  route.rt_dst = IPv4("0.0.0.0");
  route.rt_genmask = IPv4("0.0.0.0");
  route.rt_gateway = IPv4(c.gateway);
  route.rt_flags = RTF_UP | RTF_GATEWAY;
  char dev[IFNAMSIZ] = {};
  std::strncpy(dev, c.name, IFNAMSIZ - 1);
  route.rt_dev = dev;
  if (::ioctl(sock.get(), SIOCADDRT, &route) != 0) return ErrnoError("SIOCADDRT default");
  return tun;
}

}  // namespace

Result<UniqueFd> MakeLoopbackNetNamespace(int home) {
  if (::unshare(CLONE_NEWNET) != 0) return ErrnoError("unshare(CLONE_NEWNET)");
  auto made = OpenThreadNetNamespace();
  Status up = made.ok() ? Status(OkStatus()) : Status(made.error());
  // IGMPv2 and MLDv1 on the loopback: a group's reports go out when it is joined and left,
  // where v3 and v2 keep a left group's record for a later report, which a later user of the
  // namespace would send with its own (the /proc/sys/net files are the calling thread's
  // namespace's).
  if (up.ok()) up = WriteFile("/proc/sys/net/ipv4/conf/lo/force_igmp_version", "2");
  if (up.ok()) up = WriteFile("/proc/sys/net/ipv6/conf/lo/force_mld_version", "1");
  if (up.ok()) up = BringUp("lo");
  if (!EnterNetNamespace(home).ok()) std::abort();
  if (!up.ok()) return up.error();
  return made;
}

Status RestartLoopbackIn(int netns, int home) {
  if (Status s = EnterNetNamespace(netns); !s.ok()) return s;
  Status down = SetUp("lo", false);
  Status up = down.ok() ? SetUp("lo", true) : down;
  if (!EnterNetNamespace(home).ok()) std::abort();
  return up;
}

Result<std::vector<std::string>> ReadNetFilesIn(int netns, int home,
                                                const std::vector<std::string>& names) {
  if (Status s = EnterNetNamespace(netns); !s.ok()) return s.error();
  std::vector<std::string> texts;
  texts.reserve(names.size());
  for (const std::string& name : names) {
    auto text = ReadFile("/proc/thread-self/net/" + name, 1 << 16);
    texts.push_back(text.ok() ? std::move(*text) : "unreadable: " + text.error().message);
  }
  if (!EnterNetNamespace(home).ok()) std::abort();
  return texts;
}

Result<UniqueFd> TapInNamespace(int netns, const TapConfig& config) {
  auto home = OpenThreadNetNamespace();
  if (!home.ok()) return home.error();
  if (Status s = EnterNetNamespace(netns); !s.ok()) return s.error();
  auto tap = MakeTapHere(config);
  if (!EnterNetNamespace(home->get()).ok()) std::abort();
  return tap;
}

Result<std::vector<std::string>> InterfaceAddresses() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return ErrnoError("getifaddrs");
  std::vector<std::string> out;
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    char buf[INET6_ADDRSTRLEN] = {};
    if (a->ifa_addr->sa_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
      ::inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr);
      ::inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
    } else {
      continue;
    }
    out.emplace_back(buf);
  }
  ::freeifaddrs(list);
  return out;
}

Result<pid_t> SpawnAs(const std::vector<std::string>& argv, uid_t uid, gid_t gid,
                      const std::vector<int>& fds, int log_fd, rlim_t max_fds) {
  if (fds.size() > kMaxFds)
    return MakeError(ErrorKind::kSystem, argv[0] + ": more than 12 fds to pass");
  // Everything the child uses is made here: after fork it may only make async-signal-safe
  // calls (the daemon is multi-threaded).
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  auto errors = MakePipe();
  if (!errors.ok()) return MakeError(ErrorKind::kSystem, errors.error().message);
  const int error_fd = errors->write.get();
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) return ErrnoError("open /dev/null");
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(null_fd);
    return ErrnoError("fork");
  }
  if (pid == 0) {
    ChildSetUp(error_fd, uid, gid, parent, max_fds);
    ChildExec(args.data(), fds, null_fd, log_fd, error_fd);
  }
  ::close(null_fd);
  errors->write.Reset();
  int record[2] = {0, 0};
  ssize_t got;
  do {
    got = ::read(errors->read.get(), record, sizeof record);
  } while (got < 0 && errno == EINTR);
  if (got == static_cast<ssize_t>(sizeof record)) {
    (void)Reap(pid);
    return MakeError(ErrorKind::kSystem,
                     argv[0] + ": " + SpawnStepName(record[0]) + ": " + ErrnoMessage(record[1]),
                     record[1]);
  }
  return pid;
}

int ReapWithin(pid_t pid, int timeout_ms) {
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    int n;
    do {
      n = ::poll(&p, 1, timeout_ms);
    } while (n < 0 && errno == EINTR);
    if (n == 0) ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
    ::close(pidfd);
  } else {
    ::kill(pid, SIGKILL);
  }
  auto reaped = Reap(pid);
  return reaped.ok() ? reaped->wait_status : 0;
}

}  // namespace sandrun::sys
