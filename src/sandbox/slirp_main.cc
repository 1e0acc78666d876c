// sandrun-slirp: the user-mode TCP/IP of one run with the network (network.h), libslirp
// driven by a poll loop. The daemon starts it as `network_uid` (a uid that owns no sandbox and
// none of their namespaces), in the run's memory cgroup, with three fds and nothing else:
//   3  the run's tap0 (IFF_TAP|IFF_NO_PI), which the daemon made and configured in the run's
//      network namespace: the only way into the run's network this process has;
//   4  the read end of the exit pipe: readable or closed means "exit now";
//   5  the ready pipe: one byte once the stack is up and the seccomp filter is in place;
//   6  a memfd where each TCP host socket libslirp closes with its connection still open is
//      recorded (slirp_closed.h), so that the daemon can destroy the orphan it leaves.
// Its host sockets are made in the host's network namespace, where it runs. Before it takes
// any packet it installs a seccomp filter: network I/O, memory, time, read-only opens (the
// resolver file of libslirp's DNS forwarder); everything else fails with EPERM.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <slirp/libslirp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "sandbox/network_rules.h"
#include "sandbox/slirp_closed.h"
#include "sys/syscalls.h"

namespace {

constexpr int kTapFd = 3;
constexpr int kExitFd = 4;
constexpr int kReadyFd = 5;
constexpr int kClosedFd = 6;
constexpr int kReadsPerTurn = 64;  // frames taken from the tap before the sockets get a turn

struct Timer {
  SlirpTimerCb cb = nullptr;
  void* cb_opaque = nullptr;
  int64_t expire_ms = -1;  // -1: not armed
};

struct Loop {
  Slirp* slirp = nullptr;
  std::vector<pollfd> fds;
  std::vector<Timer*> timers;
};

int closed_records = 0;

// The address and port of `sa` into a record's fields (network byte order).
void Put(const sockaddr_storage& sa, uint16_t* port, uint32_t* addr) {
  if (sa.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&sa);
    *port = in->sin_port;
    std::memcpy(addr, &in->sin_addr, 4);
  } else if (sa.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&sa);
    *port = in6->sin6_port;
    std::memcpy(addr, &in6->sin6_addr, 16);
  }
}

// Records `fd` if it is a TCP socket whose connection is still open (not listening, closed or
// in TIME_WAIT): closed now, it stays in the kernel as an orphan until its data is sent.
void RecordIfOpenTcp(int fd) {
  int protocol = 0;
  socklen_t len = sizeof protocol;
  if (closed_records >= sandrun::sandbox::kMaxClosedRecords) return;
  if (::getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &len) != 0) return;
  if (protocol != IPPROTO_TCP) return;
  tcp_info info{};
  len = sizeof info;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return;
  if (info.tcpi_state == TCP_LISTEN || info.tcpi_state == TCP_CLOSE ||
      info.tcpi_state == TCP_TIME_WAIT) {
    return;
  }
  sockaddr_storage local{}, peer{};
  socklen_t local_len = sizeof local, peer_len = sizeof peer;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) return;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) return;
  sandrun::sandbox::ClosedTcp record{};
  record.family = local.ss_family;
  Put(local, &record.sport, record.src);
  Put(peer, &record.dport, record.dst);
  if (::write(kClosedFd, &record, sizeof record) == static_cast<ssize_t>(sizeof record)) {
    ++closed_records;
  }
}

}  // namespace

// libslirp closes its host sockets with close(2): this definition, in the executable, comes
// first in the dynamic linker's search, so each close is seen here before it is made.
extern "C" int close(int fd) {
  RecordIfOpenTcp(fd);
  return static_cast<int>(::syscall(SYS_close, fd));
}

namespace {

int64_t NowNs() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

ssize_t SendPacket(const void* buf, size_t len, void*) {
  ssize_t n = ::write(kTapFd, buf, len);
  // A full tap queue drops the frame, as a wire would; TCP retransmits.
  if (n < 0 && (sandrun::sys::LastErrno() == EAGAIN || sandrun::sys::LastErrno() == EINTR))
    return static_cast<ssize_t>(len);
  return n;
}

void GuestError(const char* msg, void*) { std::fprintf(stderr, "sandrun-slirp: %s\n", msg); }
int64_t ClockNs(void*) { return NowNs(); }

void* TimerNew(SlirpTimerCb cb, void* cb_opaque, void* opaque) {
  auto* loop = static_cast<Loop*>(opaque);
  auto* timer = new Timer{cb, cb_opaque, -1};
  loop->timers.push_back(timer);
  return timer;
}

void TimerFree(void* timer, void* opaque) {
  auto* loop = static_cast<Loop*>(opaque);
  for (auto it = loop->timers.begin(); it != loop->timers.end(); ++it) {
    if (*it == timer) {
      loop->timers.erase(it);
      break;
    }
  }
  delete static_cast<Timer*>(timer);
}

void TimerMod(void* timer, int64_t expire_ms, void*) {
  static_cast<Timer*>(timer)->expire_ms = expire_ms;
}

void RegisterPollFd(int, void*) {}
void UnregisterPollFd(int, void*) {}
void Notify(void*) {}

int AddPoll(int fd, int events, void* opaque) {
  auto* loop = static_cast<Loop*>(opaque);
  short e = 0;
  if (events & SLIRP_POLL_IN) e |= POLLIN;
  if (events & SLIRP_POLL_OUT) e |= POLLOUT;
  if (events & SLIRP_POLL_PRI) e |= POLLPRI;
  loop->fds.push_back(pollfd{fd, e, 0});
  return static_cast<int>(loop->fds.size()) - 1;
}

int GetRevents(int idx, void* opaque) {
  auto* loop = static_cast<Loop*>(opaque);
  const short r = loop->fds[static_cast<size_t>(idx)].revents;
  int out = 0;
  if (r & POLLIN) out |= SLIRP_POLL_IN;
  if (r & POLLOUT) out |= SLIRP_POLL_OUT;
  if (r & POLLPRI) out |= SLIRP_POLL_PRI;
  if (r & POLLERR) out |= SLIRP_POLL_ERR;
  if (r & POLLHUP) out |= SLIRP_POLL_HUP;
  return out;
}

// Milliseconds until the first armed timer fires (0 if one is due), at most `cap`.
uint32_t UntilNextTimer(const Loop& loop, uint32_t cap) {
  const int64_t now = NowNs() / 1000000;
  int64_t wait = cap;
  for (const Timer* t : loop.timers) {
    if (t->expire_ms >= 0 && t->expire_ms - now < wait) wait = t->expire_ms - now;
  }
  return static_cast<uint32_t>(wait < 0 ? 0 : wait);
}

void FireTimers(Loop& loop) {
  const int64_t now = NowNs() / 1000000;
  // A callback may free or re-arm timers: take the due ones first.
  std::vector<Timer*> due;
  for (Timer* t : loop.timers) {
    if (t->expire_ms >= 0 && t->expire_ms <= now) due.push_back(t);
  }
  for (Timer* t : due) {
    bool alive = false;
    for (const Timer* u : loop.timers) alive = alive || u == t;
    if (!alive || t->expire_ms < 0 || t->expire_ms > now) continue;
    t->expire_ms = -1;
    t->cb(t->cb_opaque);
  }
}

void ReadTap(Slirp* slirp) {
  static uint8_t frame[sandrun::sandbox::kSlirpMtu + 64];
  for (int i = 0; i < kReadsPerTurn; ++i) {
    const ssize_t n = ::read(kTapFd, frame, sizeof frame);
    if (n <= 0) return;
    slirp_input(slirp, frame, static_cast<int>(n));
  }
}

// Network I/O, memory, time and read-only opens; socket() for IPv4/IPv6 only.
bool InstallSeccomp() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
  if (ctx == nullptr) return false;
  const int allowed[] = {
      SCMP_SYS(read),          SCMP_SYS(write),
      SCMP_SYS(readv),         SCMP_SYS(writev),
      SCMP_SYS(close),         SCMP_SYS(poll),
      SCMP_SYS(ppoll),         SCMP_SYS(connect),
      SCMP_SYS(sendto),        SCMP_SYS(recvfrom),
      SCMP_SYS(sendmsg),       SCMP_SYS(recvmsg),
      SCMP_SYS(setsockopt),    SCMP_SYS(getsockopt),
      SCMP_SYS(getsockname),   SCMP_SYS(getpeername),
      SCMP_SYS(shutdown),      SCMP_SYS(bind),
      SCMP_SYS(fcntl),         SCMP_SYS(ioctl),
      SCMP_SYS(clock_gettime), SCMP_SYS(gettimeofday),
      SCMP_SYS(mmap),          SCMP_SYS(munmap),
      SCMP_SYS(mremap),        SCMP_SYS(brk),
      SCMP_SYS(madvise),       SCMP_SYS(futex),
      SCMP_SYS(exit),          SCMP_SYS(exit_group),
      SCMP_SYS(rt_sigreturn),  SCMP_SYS(rt_sigprocmask),
      SCMP_SYS(getrandom),     SCMP_SYS(newfstatat),
      SCMP_SYS(fstat),         SCMP_SYS(statx),
      SCMP_SYS(lseek),         SCMP_SYS(getpid),
      SCMP_SYS(gettid),
  };
  bool ok = true;
  for (int sys : allowed) ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ALLOW, sys, 0) == 0;
  for (int domain : {AF_INET, AF_INET6}) {
    ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
                                SCMP_A0(SCMP_CMP_EQ, static_cast<scmp_datum_t>(domain))) == 0;
  }
  ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1,
                              SCMP_A2(SCMP_CMP_MASKED_EQ, O_ACCMODE, O_RDONLY)) == 0;
  ok = ok && ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && seccomp_load(ctx) == 0;
  seccomp_release(ctx);
  return ok;
}

Slirp* NewSlirp(Loop& loop) {
  static const SlirpCb callbacks = {
      SendPacket,     GuestError,       ClockNs, TimerNew, TimerFree, TimerMod,
      RegisterPollFd, UnregisterPollFd, Notify,  nullptr,  nullptr,
  };
  SlirpConfig cfg{};
  cfg.version = 4;
  cfg.in_enabled = true;
  ::inet_pton(AF_INET, "10.0.2.0", &cfg.vnetwork);
  ::inet_pton(AF_INET, "255.255.255.0", &cfg.vnetmask);
  ::inet_pton(AF_INET, sandrun::sandbox::kSlirpGateway, &cfg.vhost);
  ::inet_pton(AF_INET, "10.0.2.15", &cfg.vdhcp_start);
  ::inet_pton(AF_INET, sandrun::sandbox::kSlirpDns, &cfg.vnameserver);
  cfg.if_mtu = sandrun::sandbox::kSlirpMtu;
  cfg.if_mru = sandrun::sandbox::kSlirpMtu;
  cfg.disable_host_loopback = true;  // 10.0.2.2 is not the host's 127.0.0.1
  cfg.enable_emu = false;
  cfg.disable_dhcp = true;  // the daemon configured tap0
  return slirp_new(&cfg, &callbacks, &loop);
}

}  // namespace

int main() {
  // A peer's reset answers libslirp's next send() with EPIPE, not a signal that ends the stack.
  ::signal(SIGPIPE, SIG_IGN);
  if (::fcntl(kTapFd, F_SETFL, O_NONBLOCK) != 0) {
    std::perror("sandrun-slirp: tap fd");
    return 2;
  }
  Loop loop;
  loop.slirp = NewSlirp(loop);
  if (loop.slirp == nullptr) {
    std::fprintf(stderr, "sandrun-slirp: slirp_new failed\n");
    return 2;
  }
  if (!InstallSeccomp()) {
    std::fprintf(stderr, "sandrun-slirp: seccomp filter not installed\n");
    return 2;
  }
  const char ready = 1;
  if (::write(kReadyFd, &ready, 1) != 1) return 2;
  ::close(kReadyFd);
  for (;;) {
    loop.fds.clear();
    loop.fds.push_back(pollfd{kTapFd, POLLIN, 0});
    loop.fds.push_back(pollfd{kExitFd, POLLIN, 0});
    uint32_t timeout = 1000;
    slirp_pollfds_fill(loop.slirp, &timeout, AddPoll, &loop);
    const int n =
        ::poll(loop.fds.data(), loop.fds.size(), static_cast<int>(UntilNextTimer(loop, timeout)));
    if (n < 0 && sandrun::sys::LastErrno() != EINTR) return 3;
    if (n > 0 && loop.fds[1].revents != 0) return 0;  // the daemon said so, or is gone
    if (n > 0 && (loop.fds[0].revents & POLLIN)) ReadTap(loop.slirp);
    slirp_pollfds_poll(loop.slirp, n < 0, GetRevents, &loop);
    FireTimers(loop);
  }
}
