// The store of prepared environments (storage/environment_store.h), with a Builder that
// writes files (the real one runs pip in a sandbox: integration.Environments).
#define BOOST_TEST_MODULE environment_store
#include "storage/environment_store.h"

#include <algorithm>
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <future>

#include "test_util.h"

namespace fs = std::filesystem;
using sandrun::storage::BuildResult;
using sandrun::storage::EnvironmentStore;
using sandrun::storage::testing::TempDir;
using Outcome = EnvironmentStore::Outcome;
using Set = std::vector<std::string>;

namespace {

// Writes `bytes` bytes into <dir>/ws/site/<first package>.
BuildResult WriteSite(const std::string& dir, const Set& packages, size_t bytes) {
  fs::create_directories(dir + "/ws/site");
  std::ofstream(dir + "/ws/site/" + packages.front()) << std::string(bytes, 'x');
  return {true, "ok"};
}

EnvironmentStore::Options Options(const TempDir& tmp) {
  EnvironmentStore::Options o;
  o.root = tmp / "envs";
  o.python = "python3.test";
  return o;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(EnvironmentStoreTests)

BOOST_AUTO_TEST_CASE(built_once_then_cached_and_published_whole) {
  TempDir tmp;
  EnvironmentStore store(Options(tmp),
                         [](const std::string& d, const Set& p) { return WriteSite(d, p, 10); });
  auto first = store.Acquire({"pkg"}, true, std::chrono::seconds(30));
  BOOST_TEST(static_cast<int>(first.outcome) == static_cast<int>(Outcome::kBuilt));
  BOOST_TEST(first.lease.held());
  BOOST_TEST(first.site_dir == tmp / "envs" + "/" + first.meta.id + "/ws/site");
  BOOST_TEST(fs::exists(first.site_dir + "/pkg"));
  BOOST_TEST(first.meta.bytes == 10u);
  auto second = store.Acquire({"pkg"}, false, std::chrono::seconds(0));
  BOOST_TEST(static_cast<int>(second.outcome) == static_cast<int>(Outcome::kCached));
  BOOST_TEST(second.meta.packages == Set{"pkg"}, boost::test_tools::per_element());
  BOOST_TEST(store.builds_started() == 1);
  // Nothing half-built is left beside it.
  for (const auto& e : fs::directory_iterator(tmp / "envs")) {
    BOOST_TEST(e.path().filename().string()[0] != '.', e.path());
  }
  // The id depends on the Python version and the set.
  BOOST_TEST(store.IdOf({"pkg"}) != store.IdOf({"pkg", "other"}));
  BOOST_TEST(store.IdOf({"pkg"}).size() == 32u);
}

BOOST_AUTO_TEST_CASE(without_may_build_an_absent_set_is_absent) {
  TempDir tmp;
  EnvironmentStore store(Options(tmp),
                         [](const std::string& d, const Set& p) { return WriteSite(d, p, 1); });
  auto a = store.Acquire({"pkg"}, false, std::chrono::seconds(1));
  BOOST_TEST(static_cast<int>(a.outcome) == static_cast<int>(Outcome::kAbsent));
  BOOST_TEST(store.builds_started() == 0);
}

BOOST_AUTO_TEST_CASE(concurrent_requests_share_one_build) {
  TempDir tmp;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  EnvironmentStore store(Options(tmp), [&](const std::string& d, const Set& p) {
    released.wait();
    return WriteSite(d, p, 5);
  });
  std::vector<std::future<Outcome>> waiters;
  for (int i = 0; i < 8; ++i) {
    waiters.push_back(std::async(std::launch::async, [&] {
      return store.Acquire({"pkg"}, true, std::chrono::seconds(60)).outcome;
    }));
  }
  release.set_value();
  for (auto& w : waiters) {
    const Outcome o = w.get();
    BOOST_TEST((o == Outcome::kBuilt || o == Outcome::kCached));
  }
  BOOST_TEST(store.builds_started() == 1);
}

BOOST_AUTO_TEST_CASE(a_wait_that_ends_first_says_building) {
  TempDir tmp;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  EnvironmentStore store(Options(tmp), [&](const std::string& d, const Set& p) {
    released.wait();
    return WriteSite(d, p, 5);
  });
  auto a = store.Acquire({"pkg"}, true, std::chrono::milliseconds(0));
  BOOST_TEST(static_cast<int>(a.outcome) == static_cast<int>(Outcome::kBuilding));
  BOOST_TEST(a.retry_after_s > 0);
  BOOST_TEST(!a.lease.held());
  release.set_value();
}

BOOST_AUTO_TEST_CASE(a_failed_build_is_remembered_with_its_output) {
  TempDir tmp;
  std::atomic<int> builds{0};
  EnvironmentStore store(Options(tmp), [&](const std::string&, const Set&) {
    ++builds;
    return BuildResult{false, "ERROR: No matching distribution found for nope"};
  });
  auto a = store.Acquire({"nope"}, true, std::chrono::seconds(30));
  BOOST_TEST(static_cast<int>(a.outcome) == static_cast<int>(Outcome::kFailed));
  BOOST_TEST(a.failure_output.find("No matching distribution") != std::string::npos);
  auto b = store.Acquire({"nope"}, true, std::chrono::seconds(30));
  BOOST_TEST(static_cast<int>(b.outcome) == static_cast<int>(Outcome::kFailed));
  BOOST_TEST(b.retry_after_s > 0);
  store.Prebuild({"nope"});  // remembered: not started again either
  BOOST_TEST(builds.load() == 1);
  BOOST_TEST(!fs::exists(tmp / "envs/" + store.IdOf({"nope"})));
}

BOOST_AUTO_TEST_CASE(eviction_takes_the_least_recently_used_and_never_a_leased_one) {
  TempDir tmp;
  EnvironmentStore store(Options(tmp),
                         [](const std::string& d, const Set& p) { return WriteSite(d, p, 1000); });
  for (const char* p : {"a", "b", "c"}) {
    BOOST_TEST(static_cast<int>(store.Acquire({p}, true, std::chrono::seconds(30)).outcome) ==
               static_cast<int>(Outcome::kBuilt));
  }
  // Last uses, oldest first: a, b, c (set explicitly: no clock in the test).
  const auto now = fs::file_time_type::clock::now();
  int age = 3;
  for (const char* p : {"a", "b", "c"}) {
    fs::last_write_time(tmp / "envs/" + store.IdOf({p}) + "/meta", now - std::chrono::hours(age--));
  }
  {
    // `a` is in use by a run: b goes instead.
    auto held = store.Acquire({"a"}, false, std::chrono::seconds(0));
    fs::last_write_time(tmp / "envs/" + store.IdOf({"a"}) + "/meta", now - std::chrono::hours(3));
    const auto removed = store.Evict(2000);
    BOOST_TEST(removed == Set{store.IdOf({"b"})}, boost::test_tools::per_element());
  }
  // Released, `a` is the least recently used.
  const auto removed = store.Evict(1000);
  BOOST_TEST(removed == Set{store.IdOf({"a"})}, boost::test_tools::per_element());
  BOOST_TEST(fs::exists(tmp / "envs/" + store.IdOf({"c"})));
  BOOST_TEST(store.Evict(1000).empty());
}

BOOST_AUTO_TEST_CASE(serving_is_the_exact_set_or_a_covering_trusted_one) {
  TempDir tmp;
  EnvironmentStore store(Options(tmp),
                         [](const std::string& d, const Set& p) { return WriteSite(d, p, 1); });
  // Someone's set with more in it than a run asks for: never served to that run.
  (void)store.Acquire({"numpy", "pandas>=2"}, true, std::chrono::seconds(30));
  (void)store.Acquire({"numpy", "pandas>=2", "scipy"}, true, std::chrono::seconds(30));
  auto name_only = [](const std::string& want, const Set& have) {
    return std::any_of(have.begin(), have.end(), [&](const std::string& h) {
      return h.substr(0, h.find_first_of("<>=!~[")) == want;
    });
  };
  auto untrusted = store.FindServing({"pandas"}, {}, name_only);
  BOOST_TEST(static_cast<int>(untrusted.outcome) == static_cast<int>(Outcome::kAbsent));
  BOOST_TEST(!untrusted.lease.held());
  // The same set exactly: served, whoever built it.
  auto exact = store.FindServing({"numpy", "pandas>=2"}, {}, name_only);
  BOOST_TEST(static_cast<int>(exact.outcome) == static_cast<int>(Outcome::kCached));
  BOOST_TEST(exact.lease.held());
  // Sets the admin chose cover what they hold: the smallest that covers.
  const Set trusted = {store.IdOf({"numpy", "pandas>=2", "scipy"}),
                       store.IdOf({"numpy", "pandas>=2"}), store.IdOf({"absent"}),
                       "not-an-id/../x"};
  auto found = store.FindServing({"pandas"}, trusted, name_only);
  BOOST_TEST(static_cast<int>(found.outcome) == static_cast<int>(Outcome::kCached));
  BOOST_TEST(found.meta.packages == (Set{"numpy", "pandas>=2"}), boost::test_tools::per_element());
  BOOST_TEST(found.lease.held());
  auto none = store.FindServing({"pandas", "torch"}, trusted, name_only);
  BOOST_TEST(static_cast<int>(none.outcome) == static_cast<int>(Outcome::kAbsent));
}

BOOST_AUTO_TEST_CASE(leftovers_of_a_crash_are_removed_at_start) {
  TempDir tmp;
  fs::create_directories(tmp / "envs/.build-0123/ws");
  fs::create_directories(tmp / "envs/.trash-0123-1");
  EnvironmentStore store(Options(tmp),
                         [](const std::string&, const Set&) { return BuildResult{}; });
  BOOST_TEST(!fs::exists(tmp / "envs/.build-0123"));
  BOOST_TEST(!fs::exists(tmp / "envs/.trash-0123-1"));
}

BOOST_AUTO_TEST_SUITE_END()
