#define BOOST_TEST_MODULE phases
#include "util/phases.h"

#include <boost/test/unit_test.hpp>
#include <string>
#include <thread>

using namespace sandrun;

BOOST_AUTO_TEST_CASE(stamps_are_kept_in_order_from_the_reset) {
  util::ResetPhases();
  util::StampPhase("a");
  util::StampPhase("b");
  size_t n = 0;
  const util::PhaseStamp* p = util::Phases(&n);
  BOOST_TEST_REQUIRE(n == 2u);
  BOOST_TEST(std::string(p[0].name) == "a");
  BOOST_TEST(std::string(p[1].name) == "b");
  BOOST_TEST(p[0].us >= 0);
  BOOST_TEST(p[1].us >= p[0].us);
  util::ResetPhases();
  util::Phases(&n);
  BOOST_TEST(n == 0u);
}

BOOST_AUTO_TEST_CASE(stamps_past_the_cap_are_dropped) {
  util::ResetPhases();
  for (size_t i = 0; i < util::kMaxPhases + 5; ++i) util::StampPhase("x");
  size_t n = 0;
  util::Phases(&n);
  BOOST_TEST(n == util::kMaxPhases);
}

BOOST_AUTO_TEST_CASE(a_thread_never_reset_records_nothing_and_threads_are_apart) {
  util::ResetPhases();
  util::StampPhase("main");
  size_t other = 99;
  std::thread t([&] {
    util::StampPhase("ignored");  // this thread never reset its stamps
    util::Phases(&other);
  });
  t.join();
  BOOST_TEST(other == 0u);
  size_t n = 0;
  util::Phases(&n);
  BOOST_TEST(n == 1u);
}
