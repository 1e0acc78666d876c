// The compiled seccomp filter, run on chosen seccomp_data by a small classic-BPF interpreter:
// checks decisions that a program inside a sandbox cannot tell apart from the kernel's own
// answer (ENOSYS for numbers above the table, which this kernel does not know either) and
// the ABI checks, without loading the filter.
#define BOOST_TEST_MODULE seccomp
#include "sandbox/seccomp.h"

#include <linux/audit.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include <boost/test/unit_test.hpp>
#include <cerrno>
#include <cstddef>
#include <cstring>

using sandrun::sandbox::SeccompFilter;

namespace {

// Interprets the subset of classic BPF that seccomp filters use (LD W ABS, JEQ/JGT/JGE/JSET
// K, JA, AND K, RET K) on `data`; fails the test on any other instruction.
uint32_t Run(const sock_fprog& prog, const seccomp_data& data) {
  uint32_t a = 0;
  for (size_t pc = 0; pc < prog.len; ++pc) {
    const sock_filter& in = prog.filter[pc];
    switch (in.code) {
      case BPF_LD | BPF_W | BPF_ABS: {
        BOOST_REQUIRE(in.k + sizeof a <= sizeof data);
        std::memcpy(&a, reinterpret_cast<const char*>(&data) + in.k, sizeof a);
        break;
      }
      case BPF_ALU | BPF_AND | BPF_K:
        a &= in.k;
        break;
      case BPF_JMP | BPF_JA:
        pc += in.k;
        break;
      case BPF_JMP | BPF_JEQ | BPF_K:
        pc += a == in.k ? in.jt : in.jf;
        break;
      case BPF_JMP | BPF_JGT | BPF_K:
        pc += a > in.k ? in.jt : in.jf;
        break;
      case BPF_JMP | BPF_JGE | BPF_K:
        pc += a >= in.k ? in.jt : in.jf;
        break;
      case BPF_JMP | BPF_JSET | BPF_K:
        pc += (a & in.k) != 0 ? in.jt : in.jf;
        break;
      case BPF_RET | BPF_K:
        return in.k;
      default:
        BOOST_FAIL("unexpected BPF instruction " << in.code << " at " << pc);
    }
  }
  BOOST_FAIL("the program ran off its end");
  return 0;
}

struct FilterFixture {
  SeccompFilter filter = [] {
    auto f = SeccompFilter::Compile();
    BOOST_TEST_REQUIRE(f.ok(), (f.ok() ? "" : f.error().message));
    return std::move(*f);
  }();

  uint32_t Decide(int nr, uint64_t a0 = 0, uint64_t a2 = 0, uint32_t arch = kNative) const {
    seccomp_data data{};
    data.nr = nr;
    data.arch = arch;
    data.args[0] = a0;
    data.args[2] = a2;
    return Run(*filter.program(), data);
  }

#if defined(__x86_64__)
  static constexpr uint32_t kNative = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  static constexpr uint32_t kNative = AUDIT_ARCH_AARCH64;
#endif
};

constexpr uint32_t Errno(int err) { return SECCOMP_RET_ERRNO | static_cast<uint32_t>(err); }

}  // namespace

BOOST_FIXTURE_TEST_SUITE(SeccompFilterDecisions, FilterFixture)

BOOST_AUTO_TEST_CASE(syscalls_above_the_table_answer_enosys) {
  for (int nr : {470, 471, 500, 1000, 0x3fffffff}) {
    BOOST_TEST(Decide(nr) == Errno(ENOSYS), "nr " << nr);
  }
  BOOST_TEST(Decide(469) == SECCOMP_RET_ALLOW);  // file_setattr: allowed, last in the table
  BOOST_TEST(Decide(467) == Errno(EPERM));       // open_tree_attr
  BOOST_TEST(Decide(435) == Errno(ENOSYS));      // clone3
  BOOST_TEST(Decide(SYS_getpid) == SECCOMP_RET_ALLOW);
  BOOST_TEST(Decide(SYS_mount) == Errno(EPERM));
}

#if defined(__x86_64__)
BOOST_AUTO_TEST_CASE(other_abis_are_killed) {
  BOOST_TEST(Decide(20, 0, 0, AUDIT_ARCH_I386) == SECCOMP_RET_KILL_PROCESS);  // i386 getpid
  constexpr int kX32 = 0x40000000;
  BOOST_TEST(Decide(kX32 | SYS_getpid) == SECCOMP_RET_KILL_PROCESS);
  BOOST_TEST(Decide(kX32 | 500) == SECCOMP_RET_KILL_PROCESS);  // not ENOSYS: x32 is killed
}
#endif

BOOST_AUTO_TEST_CASE(socket_families_outside_the_list_are_refused) {
  for (int nr : {SYS_socket, SYS_socketpair}) {
    for (uint64_t family : {AF_UNIX, AF_INET, AF_INET6}) {
      BOOST_TEST(Decide(nr, family) == SECCOMP_RET_ALLOW, nr << " family " << family);
    }
    for (uint64_t family : {0, AF_VSOCK, AF_PACKET, AF_ALG, AF_MAX - 1, AF_MAX, 1000}) {
      BOOST_TEST(Decide(nr, family) == Errno(EAFNOSUPPORT), nr << " family " << family);
    }
    // The kernel truncates the family to an int: upper bits must not smuggle one in.
    BOOST_TEST(Decide(nr, (1ULL << 32) | AF_UNIX) == Errno(EAFNOSUPPORT));
    BOOST_TEST(Decide(nr, (1ULL << 32) | AF_VSOCK) == Errno(EAFNOSUPPORT));
  }
  BOOST_TEST(Decide(SYS_socket, AF_NETLINK, NETLINK_ROUTE) == SECCOMP_RET_ALLOW);
  BOOST_TEST(Decide(SYS_socket, AF_NETLINK, NETLINK_SOCK_DIAG) == Errno(EPROTONOSUPPORT));
  BOOST_TEST(Decide(SYS_socket, AF_NETLINK, NETLINK_KOBJECT_UEVENT) == Errno(EPROTONOSUPPORT));
}

BOOST_AUTO_TEST_SUITE_END()
