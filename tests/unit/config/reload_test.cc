#define BOOST_TEST_MODULE config_reload
#include "config/reload.h"

#include <stdlib.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/config.h"

namespace {

using sandrun::config::ChangedKeys;
using sandrun::config::Config;
using sandrun::config::IsLiveKey;
using sandrun::config::KeyInfo;
using sandrun::config::KeyTable;
using sandrun::config::Load;
using sandrun::config::PlanReload;
using sandrun::config::Token;

bool Has(const std::vector<std::string>& keys, const std::string& key) {
  for (const auto& k : keys) {
    if (k == key) return true;
  }
  return false;
}

// A state directory with a link secret, removed at the end; Write puts a config file in it.
struct StateDir {
  std::filesystem::path dir;
  StateDir() {
    char name[] = "/tmp/sandrun-reload-test-XXXXXX";
    BOOST_TEST_REQUIRE(mkdtemp(name) != nullptr);
    dir = name;
    std::ofstream(dir / "link_secret.conf") << "set $sandrun_link_secret \"0123456789abcdef0\";\n";
  }
  ~StateDir() { std::filesystem::remove_all(dir); }
  std::string Write(const std::string& name, const std::string& keys) const {
    const std::filesystem::path path = dir / name;
    std::ofstream(path) << "{\"state_dir\": \"" << dir.string() << "\", \"allow_anonymous\": true, "
                        << keys << "}";
    return path.string();
  }
};

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

BOOST_AUTO_TEST_CASE(is_live_key_reads_the_key_table) {
  size_t live = 0;
  for (const KeyInfo& key : KeyTable()) {
    BOOST_TEST(IsLiveKey(key.name) == key.live, key.name);
    live += key.live ? 1 : 0;
  }
  BOOST_TEST(live == 8u);
  BOOST_TEST(!IsLiveKey("no_such_key"));
  BOOST_TEST(!IsLiveKey("pool"));
}

// The file as SIGHUP reads it: a live key (link_ttl_s) changes for the next requests, a key
// that needs a restart (max_queue) keeps its running value and is named in needs_restart.
BOOST_AUTO_TEST_CASE(a_reloaded_file_applies_live_keys_and_names_the_others) {
  const StateDir state;
  auto started = Load(state.Write("a.jsonc", "\"link_ttl_s\": 600, \"max_queue\": 16"));
  BOOST_TEST_REQUIRE(started.ok(), (started.ok() ? "" : started.error().message));
  auto loaded =
      Load(state.Write("b.jsonc",
                       "\"link_ttl_s\": 60, \"max_queue\": 3, \"zygote\": true, "
                       "\"health_allow\": \"10.0.0.0/8\", \"limits\": {\"processes\": 9}"));
  BOOST_TEST_REQUIRE(loaded.ok(), (loaded.ok() ? "" : loaded.error().message));

  auto plan = PlanReload(*started, *started, *loaded);
  BOOST_TEST(plan.next.link_ttl_s == 60);
  BOOST_TEST(plan.next.limits.processes == 9);
  BOOST_TEST(plan.next.health_allow_ranges == std::vector<std::string>{"10.0.0.0/8"});
  BOOST_TEST(plan.next.max_queue == 16);
  BOOST_TEST(!plan.next.zygote);
  BOOST_TEST(
      plan.applied == (std::vector<std::string>{"link_ttl_s", "health_allow", "limits.processes"}),
      boost::test_tools::per_element());
  // session_max_waiters_total follows max_queue when not set (Load derives it).
  BOOST_TEST(plan.needs_restart ==
                 (std::vector<std::string>{"max_queue", "zygote", "session_max_waiters_total"}),
             boost::test_tools::per_element());
  // What the daemon runs with now differs from the file in the restart keys only, and from
  // the start-up config in the live keys only.
  for (const auto& key : ChangedKeys(plan.next, *loaded)) BOOST_TEST(!IsLiveKey(key), key);
  for (const auto& key : ChangedKeys(plan.next, *started)) BOOST_TEST(IsLiveKey(key), key);
}
