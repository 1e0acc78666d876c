#define BOOST_TEST_MODULE rate_limit
#include "api/rate_limit.h"

#include <boost/test/unit_test.hpp>

using sandrun::api::Caller;
using sandrun::api::RateKey;
using sandrun::api::RateLimiter;
using sandrun::config::Token;

BOOST_AUTO_TEST_SUITE(RateLimit)

// A bound or plain token is its user whatever the header says; a front end's token counts the
// user it names; an anonymous caller is not keyed.
BOOST_AUTO_TEST_CASE(the_key_is_the_user_the_run_acts_as) {
  Token bound{"s1", Token::Kind::kBoundUser, "alice"};
  Token front{"s2", Token::Kind::kFrontEnd, ""};
  Caller as_bound{true, &bound}, as_front{true, &front}, anonymous{true, nullptr};
  BOOST_TEST(RateKey(as_bound, "") == RateKey(as_bound, "alice"));
  BOOST_TEST(RateKey(as_bound, "") == RateKey(as_front, "alice"));
  BOOST_TEST(RateKey(as_front, "bob") != RateKey(as_front, "alice"));
  BOOST_TEST(RateKey(anonymous, "alice").empty());
}

BOOST_AUTO_TEST_CASE(a_bucket_holds_the_burst_then_refills_at_the_rate) {
  RateLimiter limiter(10, 20);
  const auto t0 = RateLimiter::Clock::now();
  int allowed = 0;
  for (int i = 0; i < 40; ++i) allowed += limiter.Allow("user:alice", t0) ? 1 : 0;
  BOOST_TEST(allowed == 21);
  BOOST_TEST(limiter.Allow("user:bob", t0));  // another user has a bucket of their own
  BOOST_TEST(!limiter.Allow("user:alice", t0 + std::chrono::milliseconds(50)));
  BOOST_TEST(limiter.Allow("user:alice", t0 + std::chrono::milliseconds(150)));
  BOOST_TEST(limiter.Allow("", t0));  // anonymous: never limited
}

BOOST_AUTO_TEST_CASE(distinct_keys_are_bounded) {
  RateLimiter limiter(10, 20);
  const auto t0 = RateLimiter::Clock::now();
  for (size_t i = 0; i < RateLimiter::kMaxKeys + 10; ++i) {
    BOOST_TEST_REQUIRE(limiter.Allow("user:" + std::to_string(i), t0));
  }
}

BOOST_AUTO_TEST_SUITE_END()
