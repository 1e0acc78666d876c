#define BOOST_TEST_MODULE config_reload
#include "config/reload.h"

#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

#include "config/config.h"

namespace {

using sandrun::config::ChangedKeys;
using sandrun::config::Config;
using sandrun::config::IsLiveKey;
using sandrun::config::PlanReload;
using sandrun::config::Token;

bool Has(const std::vector<std::string>& keys, const std::string& key) {
  for (const auto& k : keys) {
    if (k == key) return true;
  }
  return false;
}

}  // namespace

BOOST_AUTO_TEST_CASE(changed_keys_names_each_difference_as_in_the_file) {
  Config a, b;
  BOOST_TEST(ChangedKeys(a, b).empty());
  b.max_queue = a.max_queue + 1;
  b.limits.memory_mb = 64;
  b.ceilings.wall_time_s = 30;
  b.tokens.push_back(Token{"secret-0123456789", Token::Kind::kOwnUser, "token-x"});
  b.link_secret = "other";
  b.languages.push_back({"ruby", {}, "main.rb", {"/usr/bin/ruby", "{file}"}});
  const std::vector<std::string> changed = ChangedKeys(a, b);
  for (const char* key : {"max_queue", "limits.memory_mb", "ceilings.wall_time_s", "tokens",
                          "link_secret", "languages"}) {
    BOOST_TEST(Has(changed, key), key);
  }
  BOOST_TEST(changed.size() == 6u);
}

BOOST_AUTO_TEST_CASE(live_keys_are_limits_ceilings_quotas_access_and_link_ttl) {
  for (const char* key : {"limits.wall_time_s", "ceilings.memory_mb", "user_quota_mb",
                          "user_quota_files", "tokens", "tokens_file", "bearer_tokens",
                          "allow_anonymous", "allowed_origins", "link_ttl_s", "health_allow"}) {
    BOOST_TEST(IsLiveKey(key), key);
  }
  for (const char* key :
       {"fcgi_socket", "state_dir", "max_concurrent_runs", "max_queue", "sandbox_uid",
        "cgroup_name", "link_secret", "languages", "max_body_bytes", "artifact_max_age_s"}) {
    BOOST_TEST(!IsLiveKey(key), key);
  }
}

BOOST_AUTO_TEST_CASE(plan_takes_live_keys_and_keeps_the_rest_running) {
  Config started;
  started.runs_dir = "/state/runs";
  Config running = started;
  running.runs_dir = "/run/sandrun/123";  // the daemon's own fallback: not a change
  Config loaded = started;
  loaded.ceilings.wall_time_s = 20;
  loaded.user_quota_mb = 7;
  loaded.allow_anonymous = true;
  loaded.tokens.push_back(Token{"tok-0123456789abcdef", Token::Kind::kBoundUser, "alice"});
  loaded.max_queue = started.max_queue + 5;
  loaded.fcgi_socket = "/elsewhere.sock";

  auto plan = PlanReload(running, started, loaded);
  BOOST_TEST(plan.next.ceilings.wall_time_s == 20);
  BOOST_TEST(plan.next.user_quota_mb == 7);
  BOOST_TEST(plan.next.allow_anonymous);
  BOOST_TEST_REQUIRE(plan.next.tokens.size() == 1u);
  BOOST_TEST(plan.next.tokens[0].user == "alice");
  BOOST_TEST(plan.next.max_queue == running.max_queue);
  BOOST_TEST(plan.next.fcgi_socket == running.fcgi_socket);
  BOOST_TEST(plan.next.runs_dir == "/run/sandrun/123");
  for (const char* key : {"ceilings.wall_time_s", "user_quota_mb", "allow_anonymous", "tokens"}) {
    BOOST_TEST(Has(plan.applied, key), key);
  }
  BOOST_TEST(plan.applied.size() == 4u);
  BOOST_TEST(Has(plan.needs_restart, "max_queue"));
  BOOST_TEST(Has(plan.needs_restart, "fcgi_socket"));
  BOOST_TEST(!Has(plan.needs_restart, "runs_dir"));
  BOOST_TEST(plan.needs_restart.size() == 2u);

  // The same file again: nothing to apply, the same keys still wait for a restart.
  auto again = PlanReload(plan.next, started, loaded);
  BOOST_TEST(again.applied.empty());
  BOOST_TEST(again.needs_restart.size() == 2u);
}
