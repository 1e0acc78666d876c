// Unit tests of sandbox/user_limits.h: shares of the sandbox uid's per-user limits.
#define BOOST_TEST_MODULE user_limits
#include "sandbox/user_limits.h"

#include <boost/test/unit_test.hpp>

namespace sandrun::sandbox {
namespace {

const UserLimitShare* Find(const std::vector<UserLimitShare>& plan, const std::string& name) {
  for (const auto& s : plan) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

// This host's defaults: 128 inotify instances for the sandbox uid, 96369 of each namespace.
const std::map<std::string, int64_t> kHost = {
    {"max_inotify_instances", 128}, {"max_inotify_watches", 192546}, {"max_fanotify_groups", 128},
    {"max_mnt_namespaces", 96369},  {"max_user_namespaces", 96369},  {"something_new", 5}};

BOOST_AUTO_TEST_CASE(shares_of_all_sandboxes_add_up_to_less_than_the_host_limit) {
  for (int64_t sandboxes : {1, 4, 9, 15}) {
    const auto plan = PlanUserLimitShares(kHost, sandboxes);
    for (const auto& s : plan) {
      const int64_t limit = s.raised_to > 0 ? s.raised_to : s.host;
      BOOST_TEST(s.share >= 1, s.name);
      BOOST_TEST(s.share * sandboxes < limit, s.name << " with " << sandboxes);
    }
  }
  // 4 kernels + 2 runs + 3 pooled: 128 / 10 = 12 inotify instances each, no raise.
  const auto plan = PlanUserLimitShares(kHost, 9);
  const UserLimitShare* inotify = Find(plan, "max_inotify_instances");
  BOOST_TEST_REQUIRE(inotify != nullptr);
  BOOST_TEST(inotify->share == 12);
  BOOST_TEST(inotify->raised_to == 0);
  BOOST_TEST(Find(plan, "max_inotify_watches")->share == 8192);  // capped
  BOOST_TEST(Find(plan, "max_mnt_namespaces")->share == 8);
  BOOST_TEST(Find(plan, "something_new") == nullptr);       // unknown limits are left alone
  BOOST_TEST(Find(plan, "max_net_namespaces") == nullptr);  // absent on this "host"
}

BOOST_AUTO_TEST_CASE(host_limit_is_raised_when_a_share_would_be_below_the_minimum) {
  // 40 sandboxes + 1: 128 / 41 = 3 < 8 instances each: raised to 8 * 41.
  const auto plan = PlanUserLimitShares(kHost, 40);
  const UserLimitShare* inotify = Find(plan, "max_inotify_instances");
  BOOST_TEST_REQUIRE(inotify != nullptr);
  BOOST_TEST(inotify->raised_to == 8 * 41);
  BOOST_TEST(inotify->share == 8);
  BOOST_TEST(Find(plan, "max_inotify_watches")->raised_to == 0);  // 192546 / 41 is enough
  BOOST_TEST(Find(plan, "max_fanotify_groups")->share == 3);
}

}  // namespace
}  // namespace sandrun::sandbox
