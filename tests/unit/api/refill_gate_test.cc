#define BOOST_TEST_MODULE refill_gate
#include <boost/test/unit_test.hpp>
#include <chrono>

#include "api/warm_pool.h"

using sandrun::api::RefillGate;
using sandrun::api::RefillMayStart;
using std::chrono::milliseconds;

namespace {

RefillGate TwoCpus() {
  return RefillGate{[] { return int64_t{0}; }, 2, milliseconds(100)};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(RefillGateRules)

BOOST_AUTO_TEST_CASE(without_a_gate_a_refill_starts_at_once) {
  RefillGate none;
  BOOST_TEST(RefillMayStart(none, 8, milliseconds(0)));
}

BOOST_AUTO_TEST_CASE(with_no_run_in_flight_a_refill_starts_at_once) {
  BOOST_TEST(RefillMayStart(TwoCpus(), 0, milliseconds(0)));
}

BOOST_AUTO_TEST_CASE(beside_a_run_a_refill_waits_out_its_patience) {
  BOOST_TEST(!RefillMayStart(TwoCpus(), 1, milliseconds(0)));
  BOOST_TEST(!RefillMayStart(TwoCpus(), 1, milliseconds(99)));
  BOOST_TEST(RefillMayStart(TwoCpus(), 1, milliseconds(100)));
}

BOOST_AUTO_TEST_CASE(while_every_cpu_runs_a_sandbox_no_refill_starts) {
  BOOST_TEST(!RefillMayStart(TwoCpus(), 2, milliseconds(0)));
  BOOST_TEST(!RefillMayStart(TwoCpus(), 2, milliseconds(60000)));
  BOOST_TEST(!RefillMayStart(TwoCpus(), 5, milliseconds(60000)));
}

BOOST_AUTO_TEST_CASE(on_one_cpu_a_refill_waits_for_no_run_in_flight) {
  RefillGate one = TwoCpus();
  one.cpus = 1;
  BOOST_TEST(!RefillMayStart(one, 1, milliseconds(60000)));
  BOOST_TEST(RefillMayStart(one, 0, milliseconds(0)));
}

BOOST_AUTO_TEST_SUITE_END()
