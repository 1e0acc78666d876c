#define BOOST_TEST_MODULE net_namespace_pool
#include "sandbox/net_namespace_pool.h"

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sys/netns.h"

using namespace sandrun;
using namespace sandrun::sandbox;

namespace {

// Takes from `pool` until it hands one out (its thread makes them in the background).
sys::UniqueFd TakeReady(NetNamespacePool& pool) {
  for (int i = 0; i < 500; ++i) {
    sys::UniqueFd fd = pool.Take();
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
