// Tests for storage/quota.cc: which runs are evicted, what expires when, the run record.
#define BOOST_TEST_MODULE storage_quota
#include "storage/quota.h"

#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

namespace sandrun::storage {
namespace {

RunInfo Run(const std::string& id, int64_t created_at, uint64_t files, uint64_t bytes,
            int64_t live_ns = 0) {
  return RunInfo{id, created_at, live_ns, Usage{files, bytes}};
}

}  // namespace
}  // namespace sandrun::storage

// At global scope: a suite is a namespace, and storage::Quota is a type.
using namespace sandrun::storage;

BOOST_AUTO_TEST_SUITE(Quota)

BOOST_AUTO_TEST_CASE(usage_equal_to_the_quota_fits) {
  BOOST_TEST(Fits({4, 100}, {4, 100}));
  BOOST_TEST(!Fits({5, 100}, {4, 100}));
  BOOST_TEST(!Fits({4, 101}, {4, 100}));
}

BOOST_AUTO_TEST_CASE(zero_in_a_quota_field_means_unbounded) {
  BOOST_TEST(Fits({1000000, 1}, {0, 100}));
  BOOST_TEST(Fits({1, 1ull << 40}, {10, 0}));
}

BOOST_AUTO_TEST_CASE(evicts_oldest_run_first) {
  const std::vector<RunInfo> runs = {Run("c", 300, 2, 0), Run("a", 100, 2, 0), Run("b", 200, 2, 0)};
  const EvictionPlan plan = PlanEviction(runs, {2, 0}, {6, 0});
  BOOST_TEST(plan.fits);
  BOOST_TEST(plan.evict == std::vector<std::string>{"a"});
}

BOOST_AUTO_TEST_CASE(evicts_only_as_many_runs_as_needed) {
  const std::vector<RunInfo> runs = {Run("a", 100, 3, 0), Run("b", 200, 3, 0), Run("c", 300, 3, 0)};
  // 9 + 4 = 13 files, quota 8: a (-> 10) is not enough, b too (-> 7).
  const EvictionPlan plan = PlanEviction(runs, {4, 0}, {8, 0});
  BOOST_TEST(plan.evict == (std::vector<std::string>{"a", "b"}));
}

BOOST_AUTO_TEST_CASE(evicts_for_bytes_as_well_as_files) {
  const std::vector<RunInfo> runs = {Run("a", 100, 1, 600), Run("b", 200, 1, 300)};
  const EvictionPlan plan = PlanEviction(runs, {1, 500}, {100, 1000});
  BOOST_TEST(plan.evict == std::vector<std::string>{"a"});
}

BOOST_AUTO_TEST_CASE(nothing_is_evicted_when_the_run_fits) {
  const std::vector<RunInfo> runs = {Run("a", 100, 1, 10), Run("b", 200, 1, 10)};
  const EvictionPlan plan = PlanEviction(runs, {1, 10}, {3, 30});
  BOOST_TEST(plan.fits);
  BOOST_TEST(plan.evict.empty());
}

BOOST_AUTO_TEST_CASE(runs_of_the_same_second_are_evicted_in_the_order_they_went_live) {
  const std::vector<RunInfo> runs = {Run("a", 100, 1, 0, 100'000'000'500),
                                     Run("b", 100, 1, 0, 100'000'000'200)};
  const EvictionPlan plan = PlanEviction(runs, {1, 0}, {2, 0});
  BOOST_TEST(plan.evict == std::vector<std::string>{"b"});
}

BOOST_AUTO_TEST_CASE(runs_of_the_same_age_are_evicted_in_run_id_order) {
  const std::vector<RunInfo> runs = {Run("y", 100, 1, 0), Run("x", 100, 1, 0)};
  const EvictionPlan plan = PlanEviction(runs, {1, 0}, {2, 0});
  BOOST_TEST(plan.evict == std::vector<std::string>{"x"});
}

BOOST_AUTO_TEST_CASE(run_alone_over_the_quota_is_refused_and_evicts_nothing) {
  const std::vector<RunInfo> runs = {Run("a", 100, 1, 10)};
  const EvictionPlan by_files = PlanEviction(runs, {5, 0}, {4, 0});
  BOOST_TEST(!by_files.fits);
  BOOST_TEST(by_files.evict.empty());
  const EvictionPlan by_bytes = PlanEviction(runs, {1, 2000}, {4, 1000});
  BOOST_TEST(!by_bytes.fits);
  BOOST_TEST(by_bytes.evict.empty());
}

BOOST_AUTO_TEST_CASE(run_expires_once_past_its_maximum_age) {
  BOOST_TEST(!RunExpired(1000, 60, 1059));
  // nginx still accepts a link expiring at 1060 during second 1060: the file stays for it.
  BOOST_TEST(!RunExpired(1000, 60, 1060));
  BOOST_TEST(RunExpired(1000, 60, 1061));
  BOOST_TEST(RunExpired(1000, 60, 5000));
}

BOOST_AUTO_TEST_CASE(zero_maximum_age_never_expires) { BOOST_TEST(!RunExpired(0, 0, 1LL << 40)); }

BOOST_AUTO_TEST_CASE(huge_recorded_time_does_not_overflow) {
  BOOST_TEST(!RunExpired(INT64_MAX - 5, 60, 1000));
}

BOOST_AUTO_TEST_CASE(link_never_outlives_its_file) {
  // Link TTL shorter than the file's age: the TTL decides.
  BOOST_TEST(LinkExpiresAt(1000, 60, 1000, 3600) == 1060);
  // File age shorter: the file decides, also for a link made later in the file's life.
  BOOST_TEST(LinkExpiresAt(1000, 3600, 1000, 60) == 1060);
  BOOST_TEST(LinkExpiresAt(1030, 3600, 1000, 60) == 1060);
  // No maximum age: the TTL alone.
  BOOST_TEST(LinkExpiresAt(1000, 3600, 1000, 0) == 4600);
}

BOOST_AUTO_TEST_CASE(run_record_round_trips) {
  const RunInfo run = Run("ignored", 1700000000, 12, 3456789, 1700000000123456789);
  const auto parsed = ParseRunRecord(EncodeRunRecord(run));
  BOOST_TEST_REQUIRE(parsed.has_value());
  BOOST_TEST(parsed->created_at == 1700000000);
  BOOST_TEST(parsed->live_ns == 1700000000123456789);
  BOOST_TEST(parsed->usage.files == 12u);
  BOOST_TEST(parsed->usage.bytes == 3456789u);
  BOOST_TEST(parsed->run_id.empty());
}

BOOST_AUTO_TEST_CASE(damaged_run_record_is_rejected) {
  const std::string good = EncodeRunRecord(Run("", 5, 1, 2));
  BOOST_TEST(ParseRunRecord(good).has_value());
  for (const std::string& bad : {
           std::string(""),
           std::string("sandrun-run 2\ncreated_at 5\nlive_ns 6\nfiles 1\nbytes 2\n"),
           std::string("sandrun-run 1\ncreated_at 5\nlive_ns 6\nfiles 1\n"),
           std::string("sandrun-run 1\ncreated_at 5\nfiles 1\nbytes 2\n"),
           std::string("sandrun-run 1\ncreated_at five\nlive_ns 6\nfiles 1\nbytes 2\n"),
           std::string("sandrun-run 1\ncreated_at 5\nlive_ns 6\nfiles -1\nbytes 2\n"),
           std::string("sandrun-run 1\ncreated_at 5\nlive_ns 6\nfiles 1\nbytes 2\nbytes 3\n"),
           std::string("sandrun-run 1\ncreated_at 5 \nlive_ns 6\nfiles 1\nbytes 2\n"),
           std::string("sandrun-run 1\ncreated_at\nlive_ns 6\nfiles 1\nbytes 2\n"),
           good.substr(0, good.size() / 2),
       }) {
    BOOST_TEST(!ParseRunRecord(bad).has_value(), bad);
  }
}

BOOST_AUTO_TEST_CASE(over_quota_message_names_the_run_and_the_quota) {
  BOOST_TEST(DescribeOverQuota({5, 3u << 20}, {4, 256u << 20}) ==
             "the run's 5 files (3 MiB) are over the per-user quota of 4 files and 256 MiB; "
             "none were published");
  BOOST_TEST(DescribeOverQuota({2, 1536u << 10}, {0, 1u << 20}) ==
             "the run's 2 files (1.5 MiB) are over the per-user quota of 1 MiB; none were "
             "published");
  BOOST_TEST(DescribeOverQuota({14, 3000}, {4, 1u << 20}) ==
             "the run's 14 files (2.9 KiB) are over the per-user quota of 4 files and 1 MiB; "
             "none were published");
  BOOST_TEST(DescribeOverQuota({9, 10}, {4, 0}) ==
             "the run's 9 files (10 bytes) are over the per-user quota of 4 files; none were "
             "published");
}

BOOST_AUTO_TEST_SUITE_END()
