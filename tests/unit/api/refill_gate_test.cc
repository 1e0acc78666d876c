#define BOOST_TEST_MODULE refill_gate
#include <boost/test/unit_test.hpp>
#include <chrono>

#include "run/warm_pool.h"

using sandrun::run::RefillGate;
using sandrun::run::RefillMayStart;
using std::chrono::milliseconds;

namespace {

using sandrun::run::RefillLoad;

RefillGate TwoCpus() {
  return RefillGate{[] { return RefillLoad{}; }, 2, milliseconds(100)};
}

// `n` runs in flight, all of them on a CPU.
RefillLoad Busy(int64_t n) { return RefillLoad{n, n}; }

}  // namespace

BOOST_AUTO_TEST_SUITE(RefillGateRules)

BOOST_AUTO_TEST_CASE(without_a_gate_a_refill_starts_at_once) {
  RefillGate none;
  BOOST_TEST(RefillMayStart(none, Busy(8), milliseconds(0)));
}

BOOST_AUTO_TEST_CASE(with_no_run_in_flight_a_refill_starts_at_once) {
  BOOST_TEST(RefillMayStart(TwoCpus(), Busy(0), milliseconds(0)));
}

BOOST_AUTO_TEST_CASE(beside_a_run_a_refill_waits_out_its_patience) {
  BOOST_TEST(!RefillMayStart(TwoCpus(), Busy(1), milliseconds(0)));
  BOOST_TEST(!RefillMayStart(TwoCpus(), Busy(1), milliseconds(99)));
  BOOST_TEST(RefillMayStart(TwoCpus(), Busy(1), milliseconds(100)));
}

BOOST_AUTO_TEST_CASE(while_every_cpu_runs_a_sandbox_no_refill_starts) {
  BOOST_TEST(!RefillMayStart(TwoCpus(), Busy(2), milliseconds(0)));
  BOOST_TEST(!RefillMayStart(TwoCpus(), Busy(2), milliseconds(60000)));
  BOOST_TEST(!RefillMayStart(TwoCpus(), Busy(5), milliseconds(60000)));
}

BOOST_AUTO_TEST_CASE(on_one_cpu_a_refill_waits_for_no_run_in_flight) {
  RefillGate one = TwoCpus();
  one.cpus = 1;
  BOOST_TEST(!RefillMayStart(one, Busy(1), milliseconds(60000)));
  BOOST_TEST(RefillMayStart(one, Busy(0), milliseconds(0)));
}

BOOST_AUTO_TEST_CASE(runs_that_use_no_cpu_do_not_hold_a_refill_back) {
  // Two runs sleeping on two CPUs: the refill waits out its patience, then starts.
  BOOST_TEST(!RefillMayStart(TwoCpus(), RefillLoad{2, 0}, milliseconds(0)));
  BOOST_TEST(RefillMayStart(TwoCpus(), RefillLoad{2, 0}, milliseconds(100)));
  BOOST_TEST(RefillMayStart(TwoCpus(), RefillLoad{5, 1}, milliseconds(100)));
  BOOST_TEST(!RefillMayStart(TwoCpus(), RefillLoad{5, 2}, milliseconds(60000)));
  // More on a CPU than in flight (other work on the host) counts as the runs in flight.
  BOOST_TEST(RefillMayStart(TwoCpus(), RefillLoad{1, 7}, milliseconds(100)));
}

BOOST_AUTO_TEST_SUITE_END()
