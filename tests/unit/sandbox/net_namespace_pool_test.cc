#define BOOST_TEST_MODULE net_namespace_pool
#include "sandbox/net_namespace_pool.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sys/netns.h"

using namespace sandrun;
using namespace sandrun::sandbox;

namespace {

// Takes from `pool` until it hands one out (its thread makes them in the background).
sys::UniqueFd TakeReady(NetNamespacePool& pool, const std::string& owner = "") {
  for (int i = 0; i < 500; ++i) {
    sys::UniqueFd fd = pool.Take(owner);
    if (fd.valid()) return fd;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return {};
}

// What the namespace `fd` holds, seen from inside it: its interfaces and whether lo is up.
struct Inside {
  std::vector<std::string> interfaces;
  bool lo_up = false;
};

Inside Look(int fd, int home) {
  Inside in;
  BOOST_REQUIRE(sys::EnterNetNamespace(fd).ok());
  if (struct if_nameindex* names = ::if_nameindex()) {
    for (auto* n = names; n->if_index != 0; ++n) in.interfaces.emplace_back(n->if_name);
    ::if_freenameindex(names);
  }
  sys::UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  ifreq request{};
  std::strncpy(request.ifr_name, "lo", IFNAMSIZ - 1);
  in.lo_up = sock.valid() && ::ioctl(sock.get(), SIOCGIFFLAGS, &request) == 0 &&
             (request.ifr_flags & IFF_UP) != 0;
  BOOST_REQUIRE(sys::EnterNetNamespace(home).ok());
  return in;
}

ino_t Inode(int fd) {
  struct stat st {};
  BOOST_REQUIRE(::fstat(fd, &st) == 0);
  return st.st_ino;
}

// A run's end as the launcher gives it back: a pidfd of a process, ended and reaped
// (`live` false) or still running until Stop (`live` true).
struct RunEnd {
  explicit RunEnd(bool live) {
    pid = ::fork();
    BOOST_REQUIRE(pid >= 0);
    if (pid == 0) {
      if (live) ::pause();
      ::_exit(0);
    }
    pidfd = sys::UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    BOOST_REQUIRE(pidfd.valid());
    if (!live) Stop();
  }
  ~RunEnd() { Stop(); }
  void Stop() {
    if (pid < 0) return;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }
  sys::UniqueFd Dup() const { return sys::UniqueFd(::dup(pidfd.get())); }
  pid_t pid = -1;
  sys::UniqueFd pidfd;
};

// Waits until the pool has checked `n` namespaces given back (kept or let go).
void AwaitChecked(NetNamespacePool& pool, long n) {
  for (int i = 0; i < 1000; ++i) {
    const auto s = pool.stats();
    if (s.recycled + s.discarded >= n) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  BOOST_FAIL("the pool did not check the namespaces given back");
}

// In the namespace `fd` (this thread goes there and back): a loopback TCP connection whose
// accepting end closes first, so it stays in TIME_WAIT after both ends are closed.
void LeaveTimeWait(int fd, int home) {
  BOOST_REQUIRE(sys::EnterNetNamespace(fd).ok());
  sys::UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  BOOST_REQUIRE(::bind(listener.get(), sa, sizeof addr) == 0);
  BOOST_REQUIRE(::listen(listener.get(), 1) == 0);
  BOOST_REQUIRE(::getsockname(listener.get(), sa, &len) == 0);
  sys::UniqueFd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  BOOST_REQUIRE(::connect(client.get(), sa, sizeof addr) == 0);
  sys::UniqueFd accepted(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  BOOST_REQUIRE(accepted.valid());
  accepted.Reset();
  char byte;
  BOOST_REQUIRE(::read(client.get(), &byte, 1) == 0);  // the FIN: then close, the last ACK
  BOOST_REQUIRE(sys::EnterNetNamespace(home).ok());
}

// In the namespace `fd`: a TCP socket listening on a loopback port, which has sent nothing
// (no counter moves), returned open.
sys::UniqueFd Listen(int fd, int home) {
  BOOST_REQUIRE(sys::EnterNetNamespace(fd).ok());
  sys::UniqueFd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  BOOST_REQUIRE(::listen(sock.get(), 1) == 0);
  BOOST_REQUIRE(sys::EnterNetNamespace(home).ok());
  return sock;
}

// Runs `step` with this thread in the namespace `fd`, then goes back to `home`.
void In(int fd, int home, const std::function<void()>& step) {
  BOOST_REQUIRE(sys::EnterNetNamespace(fd).ok());
  step();
  BOOST_REQUIRE(sys::EnterNetNamespace(home).ok());
}

// In the namespace `fd`: one UDP datagram to a loopback port nobody listens on (counters
// move: Udp OutDatagrams, NoPorts, an ICMP port unreachable), the socket closed.
void SendToNobody(int fd, int home) {
  In(fd, home, [] {
    sys::UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(9);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_REQUIRE(
        ::sendto(sock.get(), "x", 1, 0, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 1);
  });
}

// In the namespace `fd`: a UDP socket joins 239.9.9.first .. first+count-1 on the loopback,
// holds them `hold` (0: leaves at once) and is closed.
void JoinGroupsFor(int fd, int home, int first, int count, std::chrono::milliseconds hold) {
  In(fd, home, [&] {
    sys::UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    for (int i = first; i < first + count; ++i) {
      ip_mreq group{};
      group.imr_multiaddr.s_addr = htonl(0xEF090900u + static_cast<uint32_t>(i));
      group.imr_interface.s_addr = htonl(INADDR_LOOPBACK);
      BOOST_REQUIRE(::setsockopt(sock.get(), IPPROTO_IP, IP_ADD_MEMBERSHIP, &group, sizeof group) ==
                    0);
    }
    std::this_thread::sleep_for(hold);
  });
}

// Seven groups joined and left at once: their joins' reports are still waiting on a timer.
void JoinAndLeaveGroups(int fd, int home) {
  JoinGroupsFor(fd, home, 1, 7, std::chrono::milliseconds(0));
}

// One group for 200 ms: its report goes out a tick after the join.
void JoinOneGroupAWhile(int fd, int home) {
  JoinGroupsFor(fd, home, 100, 1, std::chrono::milliseconds(200));
}

// In the namespace `fd`: a UDP socket joins ff05::1:3 on the loopback and is closed at once.
void JoinAndLeaveIpv6Group(int fd, int home) {
  In(fd, home, [] {
    sys::UniqueFd sock(::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    ipv6_mreq group{};
    BOOST_REQUIRE(::inet_pton(AF_INET6, "ff05::1:3", &group.ipv6mr_multiaddr) == 1);
    group.ipv6mr_interface = 1;  // lo
    BOOST_REQUIRE(::setsockopt(sock.get(), IPPROTO_IPV6, IPV6_JOIN_GROUP, &group, sizeof group) ==
                  0);
  });
}

// In the namespace `fd`: a UDP socket connected to ::1 (a route lookup, no packet sent).
void LookUpIpv6Loopback(int fd, int home) {
  In(fd, home, [] {
    sys::UniqueFd sock(::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_port = htons(9);
    addr.sin6_addr = in6addr_loopback;
    BOOST_REQUIRE(::connect(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  });
}

// Takes a namespace for "alice", lets `use` do something in it (the namespace's fd and this
// thread's own), gives it back after a run that ended (`live` false) or goes on, and waits for
// the pool's check. Returns the pool's counts then, and the namespace's inode.
struct GaveBack {
  NetNamespaceStats stats;
  ino_t inode = 0;
};
GaveBack GiveBackAfter(NetNamespacePool& pool, bool live,
                       const std::function<void(int, int)>& use) {
  sys::UniqueFd fd = TakeReady(pool, "alice");
  BOOST_REQUIRE(fd.valid());
  GaveBack out;
  out.inode = Inode(fd.get());
  use(fd.get(), pool.home());
  RunEnd end(live);
  const auto before = pool.stats();
  pool.Return(std::move(fd), "alice", end.Dup());
  AwaitChecked(pool, before.recycled + before.discarded + 1);
  out.stats = pool.stats();
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_taken_namespace_has_only_its_loopback_up) {
  NetNamespacePool pool(2);
  BOOST_REQUIRE(pool.home() >= 0);
  sys::UniqueFd fd = TakeReady(pool);
  BOOST_REQUIRE(fd.valid());
  const Inside in = Look(fd.get(), pool.home());
  BOOST_TEST(in.interfaces == std::vector<std::string>{"lo"});
  BOOST_TEST(in.lo_up);
  BOOST_TEST(Inode(fd.get()) != Inode(pool.home()), "not the daemon's own namespace");
  // This thread is back home: its namespace is the one it started in.
  auto now = sys::OpenThreadNetNamespace();
  BOOST_REQUIRE(now.ok());
  BOOST_TEST(Inode(now->get()) == Inode(pool.home()));
}

BOOST_AUTO_TEST_CASE(every_take_is_a_namespace_of_its_own) {
  NetNamespacePool pool(3);
  std::set<ino_t> seen;
  std::vector<sys::UniqueFd> held;  // held, so that no inode is reused meanwhile
  for (int i = 0; i < 8; ++i) {
    sys::UniqueFd fd = TakeReady(pool);
    BOOST_REQUIRE(fd.valid());
    seen.insert(Inode(fd.get()));
    held.push_back(std::move(fd));
  }
  BOOST_TEST(seen.size() == 8u);
  const auto stats = pool.stats();
  BOOST_TEST(stats.hits == 8);
  BOOST_TEST(stats.failures == 0);
}

BOOST_AUTO_TEST_CASE(size_zero_hands_out_none) {
  NetNamespacePool pool(0);
  BOOST_TEST(!pool.Take().valid());
  BOOST_TEST(!pool.Take().valid());
}

BOOST_AUTO_TEST_CASE(an_untouched_namespace_comes_back_to_its_owner_and_no_one_else) {
  NetNamespacePool pool(2);
  sys::UniqueFd fd = TakeReady(pool, "alice");
  BOOST_REQUIRE(fd.valid());
  const ino_t used = Inode(fd.get());
  RunEnd end(false);
  pool.Return(std::move(fd), "alice", end.Dup());
  AwaitChecked(pool, 1);
  BOOST_TEST(pool.stats().recycled == 1);
  sys::UniqueFd bobs = TakeReady(pool, "bob");
  BOOST_REQUIRE(bobs.valid());
  BOOST_TEST(Inode(bobs.get()) != used, "another owner never gets alice's");
  sys::UniqueFd again = pool.Take("alice");
  BOOST_REQUIRE(again.valid());
  BOOST_TEST(Inode(again.get()) == used);
  BOOST_TEST(pool.stats().reused == 1);
}

BOOST_AUTO_TEST_CASE(a_namespace_with_a_connection_in_time_wait_is_let_go) {
  NetNamespacePool pool(2);
  const GaveBack gave = GiveBackAfter(pool, false, LeaveTimeWait);
  BOOST_TEST(gave.stats.discarded == 1);
  BOOST_TEST(gave.stats.recycled == 0);
  sys::UniqueFd next = TakeReady(pool, "alice");
  BOOST_REQUIRE(next.valid());
  BOOST_TEST(Inode(next.get()) != gave.inode);
}

BOOST_AUTO_TEST_CASE(a_namespace_whose_counters_moved_is_let_go) {
  NetNamespacePool pool(2);
  const auto stats = GiveBackAfter(pool, false, SendToNobody).stats;
  BOOST_TEST(stats.discarded == 1);
  BOOST_TEST(stats.recycled == 0);
}

BOOST_AUTO_TEST_CASE(a_namespace_with_a_socket_still_open_is_let_go) {
  NetNamespacePool pool(2);
  // Its counters are a fresh namespace's; only the socket count tells (a socket passed out of
  // the run, or one the kernel still holds).
  sys::UniqueFd listening;
  const auto stats =
      GiveBackAfter(pool, false, [&](int fd, int home) { listening = Listen(fd, home); }).stats;
  BOOST_TEST(stats.discarded == 1);
  BOOST_TEST(stats.recycled == 0);
}

BOOST_AUTO_TEST_CASE(a_namespace_whose_run_goes_on_is_let_go) {
  NetNamespacePool pool(2);
  // A process of the run still there (after the check's wait too).
  const auto stats = GiveBackAfter(pool, true, [](int, int) {}).stats;
  BOOST_TEST(stats.discarded == 1);
}

// A run that joins multicast groups and leaves them at once. In IGMPv3 the left groups'
// records would stay (no restart of the loopback clears them) and go out with the next
// report in the namespace, whoever's: the pool's namespaces speak IGMPv2 and MLDv1, which keep
// none. What the next user of the namespace sends when it joins a group is what a fresh
// namespace sends; an IPv6 join is reported at once (MLDv1), and the namespace goes.
BOOST_AUTO_TEST_CASE(no_record_of_a_run_s_multicast_groups_outlives_it) {
  NetNamespacePool pool(2);
  GiveBackAfter(pool, false, JoinAndLeaveGroups);
  sys::UniqueFd next = TakeReady(pool, "alice");  // the one given back, if kept
  sys::UniqueFd fresh = TakeReady(pool);
  BOOST_REQUIRE(next.valid() && fresh.valid());
  for (int fd : {next.get(), fresh.get()}) JoinOneGroupAWhile(fd, pool.home());
  auto sent_next = sys::ReadNetFilesIn(next.get(), pool.home(), {"dev"});
  auto sent_fresh = sys::ReadNetFilesIn(fresh.get(), pool.home(), {"dev"});
  BOOST_REQUIRE(sent_next.ok() && sent_fresh.ok());
  BOOST_TEST(*sent_next == *sent_fresh, "the same report as a fresh namespace's");
  const auto v6 = GiveBackAfter(pool, false, JoinAndLeaveIpv6Group).stats;
  BOOST_TEST(v6.discarded >= 1);
}

// rt6_stats counts the per-CPU IPv6 routes ever made: a run that looked up ::1 leaves a
// count no restart clears, and its namespace goes.
BOOST_AUTO_TEST_CASE(a_namespace_whose_run_looked_up_ipv6_loopback_is_let_go) {
  NetNamespacePool pool(2);
  const auto stats = GiveBackAfter(pool, false, LookUpIpv6Loopback).stats;
  BOOST_TEST(stats.discarded == 1);
  BOOST_TEST(stats.recycled == 0);
}
