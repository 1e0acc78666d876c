// Tests for storage/janitor.cc: expired runs, leftovers and empty user directories go; fresh
// runs and anything outside the store stay. The clock is injected; nothing sleeps.
#define BOOST_TEST_MODULE storage_janitor
#include "storage/janitor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <ctime>
#include <string>
#include <vector>

#include "storage/artifact_store.h"
#include "storage/signed_link.h"
#include "storage/user_store.h"
#include "test_util.h"

namespace sandrun::storage {
namespace {

using testing::Exists;
using testing::ListTree;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

constexpr int64_t kNow = 1700000000;
constexpr int64_t kMaxAge = 3600;

struct JanitorFixture {
  JanitorFixture() {
    publish.artifacts_root = state / "artifacts";
    publish.public_base_url = "https://sandrun.example";
    publish.link_secret = "s3cr3t";
    publish.user_dir_key = "user-key";
    publish.max_age_s = kMaxAge;
    janitor.artifacts_root = publish.artifacts_root;
    janitor.max_age_s = kMaxAge;
  }

  std::string UserPath(const std::string& user) const {
    return publish.artifacts_root + "/" + UserDir(user, publish.user_dir_key);
  }
  std::string RunPath(const std::string& user, const std::string& run_id) const {
    return UserPath(user) + "/" + run_id;
  }

  // Publishes one file for `user` as run `run_id`, as if at `when`.
  void PublishAt(const std::string& user, const std::string& run_id, int64_t when) {
    WriteFile(workspace / "out.txt", run_id);
    auto walk = WalkWorkspace(workspace.path(), {});
    BOOST_TEST_REQUIRE(walk.ok());
    PublishOptions options = publish;
    options.now_epoch_s = when;
    auto result = Publish(workspace.path(), walk->files, user, run_id, options);
    BOOST_TEST_REQUIRE(result.ok(), (result.ok() ? "" : result.error().message));
    BOOST_TEST_REQUIRE(result->files.size() == 1u);
  }

  TempDir workspace;
  TempDir state;
  PublishOptions publish;
  JanitorOptions janitor;
};

void SetMtime(const std::string& path, int64_t when) {
  const timespec times[2] = {{static_cast<time_t>(when), 0}, {static_cast<time_t>(when), 0}};
  BOOST_TEST_REQUIRE(utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) == 0);
}

}  // namespace
}  // namespace sandrun::storage

// At global scope: a suite is a namespace, and storage::Janitor is a class.
using namespace sandrun::storage;
using sandrun::storage::testing::Exists;
using sandrun::storage::testing::ListTree;
using sandrun::storage::testing::ReadFile;
using sandrun::storage::testing::TempDir;
using sandrun::storage::testing::WriteFile;

BOOST_FIXTURE_TEST_SUITE(Janitor, sandrun::storage::JanitorFixture)

BOOST_AUTO_TEST_CASE(removes_expired_runs_and_keeps_fresh_ones) {
  PublishAt("alice", "old", kNow);
  PublishAt("alice", "new", kNow + 100);
  const SweepStats stats = SweepArtifacts(janitor, kNow + kMaxAge + 1);
  BOOST_TEST(stats.runs_removed == 1);
  BOOST_TEST(stats.runs_kept == 1);
  BOOST_TEST(stats.kept.files == 1u);
  // "new": 3 bytes, counted as the blocks they use (file_copy.h BytesOnDisk).
  struct stat st;
  BOOST_TEST_REQUIRE(stat((RunPath("alice", "new") + "/out.txt").c_str(), &st) == 0);
  BOOST_TEST(stats.kept.bytes == static_cast<uint64_t>(st.st_blocks) * 512);
  BOOST_TEST(stats.errors.empty());
  BOOST_TEST(!Exists(RunPath("alice", "old")));
  BOOST_TEST(ReadFile(RunPath("alice", "new") + "/out.txt") == "new");
  // Nothing of the removed run is left under another name.
  for (const std::string& rel : ListTree(UserPath("alice"))) {
    BOOST_TEST(rel.rfind("new", 0) == 0u, rel);
  }
}

BOOST_AUTO_TEST_CASE(nothing_expires_before_its_time) {
  PublishAt("alice", "run", kNow);
  const SweepStats stats = SweepArtifacts(janitor, kNow + kMaxAge);  // its links' last second
  BOOST_TEST(stats.runs_removed == 0);
  BOOST_TEST(Exists(RunPath("alice", "run") + "/out.txt"));
}

BOOST_AUTO_TEST_CASE(removes_user_directories_left_empty) {
  PublishAt("alice", "old", kNow);
  PublishAt("bob", "new", kNow + kMaxAge + 1);
  const SweepStats stats = SweepArtifacts(janitor, kNow + kMaxAge + 1);
  BOOST_TEST(stats.user_dirs_removed == 1);
  BOOST_TEST(!Exists(UserPath("alice")));
  BOOST_TEST(Exists(RunPath("bob", "new")));
  BOOST_TEST(Exists(publish.artifacts_root));  // the root itself stays
}

BOOST_AUTO_TEST_CASE(publishing_after_the_user_directory_was_removed_works) {
  PublishAt("alice", "old", kNow);
  SweepArtifacts(janitor, kNow + kMaxAge + 1);
  BOOST_TEST_REQUIRE(!Exists(UserPath("alice")));
  PublishAt("alice", "again", kNow + kMaxAge + 1);
  BOOST_TEST(Exists(RunPath("alice", "again") + "/out.txt"));
}

BOOST_AUTO_TEST_CASE(run_without_a_record_expires_by_its_directory_time) {
  PublishAt("alice", "legacy", kNow);
  // As published by a version without run records.
  const std::string run = RunPath("alice", "legacy");
  BOOST_TEST_REQUIRE(unlink((run + "/.sandrun/run").c_str()) == 0);
  BOOST_TEST_REQUIRE(rmdir((run + "/.sandrun").c_str()) == 0);
  SetMtime(run, kNow);
  SweepStats stats = SweepArtifacts(janitor, kNow + kMaxAge);
  BOOST_TEST(stats.runs_kept == 1);
  BOOST_TEST(stats.kept.files == 1u);  // measured by walking it
  stats = SweepArtifacts(janitor, kNow + kMaxAge + 1);
  BOOST_TEST(stats.runs_removed == 1);
  BOOST_TEST(!Exists(run));
}

BOOST_AUTO_TEST_CASE(removes_leftovers_of_a_crash_at_start_up) {
  janitor.max_age_s = 0;  // runs never expire here: this is about leftovers
  PublishAt("alice", "kept", kNow);
  const std::string user = UserPath("alice");
  WriteFile(user + "/.staging-dead/half.csv", "a,b\n");
  WriteFile(user + "/.trash-0123456789abcdef/x/y.txt", "y");
  // A later sweep leaves recent leftovers alone: they may belong to a publish in progress.
  janitor.leftover_age_s = 3600;
  SweepStats stats = SweepArtifacts(janitor, time(nullptr));
  BOOST_TEST(stats.leftovers_removed == 0);
  BOOST_TEST(Exists(user + "/.staging-dead/half.csv"));
  // At start-up nothing is in progress: all of them go.
  stats = SweepArtifacts(janitor, kNow, /*all_leftovers=*/true);
  BOOST_TEST(stats.leftovers_removed == 2);
  BOOST_TEST(!Exists(user + "/.staging-dead"));
  BOOST_TEST(!Exists(user + "/.trash-0123456789abcdef"));
  BOOST_TEST(Exists(RunPath("alice", "kept") + "/out.txt"));
}

BOOST_AUTO_TEST_CASE(removes_old_leftovers_in_a_periodic_sweep) {
  const std::string user = UserPath("alice");
  WriteFile(user + "/.staging-dead/half.csv", "a,b\n");
  janitor.leftover_age_s = 3600;
  const SweepStats stats = SweepArtifacts(janitor, time(nullptr) + 3600);
  BOOST_TEST(stats.leftovers_removed == 1);
  BOOST_TEST(!Exists(user));  // and the user directory, now empty
}

BOOST_AUTO_TEST_CASE(never_follows_symlinks) {
  TempDir outside;
  WriteFile(outside / "victim/keep.txt", "keep");
  WriteFile(outside / "userdir/run/keep.txt", "keep");
  PublishAt("alice", "old", kNow);
  // A symlink where a user directory would be, and one where a run would be.
  BOOST_TEST_REQUIRE(
      symlink((outside / "userdir").c_str(), (publish.artifacts_root + "/linked").c_str()) == 0);
  BOOST_TEST_REQUIRE(
      symlink((outside / "victim").c_str(), (UserPath("alice") + "/linkrun").c_str()) == 0);
  const SweepStats stats = SweepArtifacts(janitor, kNow + 10 * kMaxAge, true);
  BOOST_TEST(stats.runs_removed == 1);  // "old" only
  BOOST_TEST(ReadFile(outside / "victim/keep.txt") == "keep");
  BOOST_TEST(ReadFile(outside / "userdir/run/keep.txt") == "keep");
}

BOOST_AUTO_TEST_CASE(missing_root_is_not_an_error) {
  janitor.artifacts_root = state / "nothing-here";
  const SweepStats stats = SweepArtifacts(janitor, kNow);
  BOOST_TEST(stats.errors.empty());
  BOOST_TEST(stats.runs_removed == 0);
}

BOOST_AUTO_TEST_CASE(start_sweeps_at_once_then_stop_ends_the_thread) {
  PublishAt("alice", "old", kNow);
  std::vector<SweepStats> reports;
  sandrun::storage::Janitor thread(
      janitor, /*interval_s=*/3600, [] { return kNow + kMaxAge + 1; },
      [&reports](const SweepStats& stats) { reports.push_back(stats); });
  thread.Start();
  // The start-up sweep ran in this thread, before Start returned.
  BOOST_TEST(thread.sweeps() == 1);
  BOOST_TEST_REQUIRE(reports.size() == 1u);
  BOOST_TEST(reports[0].runs_removed == 1);
  BOOST_TEST(!Exists(RunPath("alice", "old")));
  // Stop wakes the thread from its hour-long wait; a broken wake-up hangs here.
  thread.Stop();
  thread.Stop();  // idempotent
  BOOST_TEST(thread.sweeps() == 1);
}

BOOST_AUTO_TEST_SUITE_END()
