// Kernel-side socket buffers of a run without network (suite Containment): loopback TCP pairs
// (both ends writing), UDP receivers and Unix socketpairs written to without reading, from 4
// processes, each kind up to 5x the run's memory_mb (the probe's own cap). The buffers must
// stay within memory_mb while the run lives (v1: memory.kmem.tcp.limit_in_bytes, which counts
// TCP and UDP, plus the forced charges of at most the socket cap's sockets; Unix buffers count
// in memory.limit_in_bytes) and nothing may stay on the host once it ended.
#include "socket_memory.h"

#include <boost/test/unit_test.hpp>
#include <string>

#include "helpers.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

constexpr long long kMemoryMb = 32;
constexpr long long kCapMb = 5 * kMemoryMb;  // the probe's cap: what an unbounded run reaches
constexpr int64_t kLeftBoundPages = kMemoryMb * 256;  // memory_mb in pages

std::string Limits() {
  return R"("limits": {"memory_mb": )" + std::to_string(kMemoryMb) + R"(, "wall_time_s": 60})";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(Containment)

BOOST_AUTO_TEST_CASE(socket_buffers_of_a_run_stay_within_its_memory_and_do_not_outlive_it) {
  for (const char* kind : {"tcp", "udp", "unix", "unix-dgram"}) {
    BOOST_TEST_CONTEXT("kind " << kind) {
      const int64_t baseline = SocketPages();
      SocketPeakSampler sampler;
      auto doc = RunWithProbe(
          "./probe sockfill " + std::string(kind) + " 4 40 " + std::to_string(kCapMb), Limits());
      const long long cgroup_peak = sampler.Stop();
      const std::string out = Str(doc, "stdout") + Str(doc, "stderr");
      const SockFill f = ParseSockFill(out);
      const int64_t left = SocketPagesLeftAfter(baseline, kLeftBoundPages / 8, 5.0);
      const long long bound = SocketPeakBound(kMemoryMb);
      BOOST_TEST_MESSAGE(
          kind << ": status " << Str(doc, "status") << ", " << f.sockets << " sockets (first error "
               << f.first_error << "), written " << (f.written >> 20) << " MiB, sockets' buffers "
               << (f.kernel >> 10) << " KiB, run cgroup's socket peak " << (cgroup_peak >> 10)
               << " KiB, host TCP+UDP growth (all stacks) " << (f.HostBytes() >> 10)
               << " KiB (bound " << (bound >> 10) << " KiB), host pages left after 5 s " << left
               << " (bound " << kLeftBoundPages << ")");
      // Unix buffers are charged to memory.limit_in_bytes: the run may end as memory_limit
      // before it prints.
      const bool oom = Str(doc, "status") == "memory_limit";
      BOOST_TEST((f.found || oom), out);
      if (f.found) {
        BOOST_TEST(f.kernel <= bound, out);
        BOOST_TEST(cgroup_peak > 0);
        BOOST_TEST(cgroup_peak <= bound);
      }
      // 320 sockets asked for, past the cap memory_mb 32 buys (64): refused with EPERM, and
      // the run's answer otherwise normal (UDP spends the probe's byte budget first).
      if (f.found && std::string(kind) == "tcp") {
        BOOST_TEST(f.first_error == "EPERM", out);
        BOOST_TEST(Str(doc, "status") == "ok", out);
      }
      BOOST_TEST(left <= kLeftBoundPages);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
