// Unit tests of storage/session_store.h: saving, restoring, budgets and crash recovery.
#define BOOST_TEST_MODULE storage_session_store
#include "storage/session_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "storage/file_copy.h"
#include "test_util.h"

namespace sandrun::storage {
namespace {

using testing::Exists;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

// Entries and bytes on disk below `root` (not following symlinks), each inode's bytes once.
Usage HostUsage(const std::string& root) {
  Usage usage;
  std::map<ino_t, bool> seen;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    struct stat st;
    if (lstat(entry.path().c_str(), &st) != 0) continue;
    usage.files += 1;
    if (!seen[st.st_ino]) usage.bytes += BytesOnDisk(st);
    seen[st.st_ino] = true;
  }
  return usage;
}

struct Fixture {
  Fixture() : store(root.path(), "test-key") {}

  SessionLock LockOk(const std::string& session = "s1", const std::string& user = "alice") {
    auto lock = store.Lock(user, session, std::chrono::milliseconds(0));
    BOOST_TEST_REQUIRE(lock.ok(), (lock.ok() ? "" : lock.error().message));
    return std::move(*lock);
  }
  std::string Workspace(const std::string& name = "ws") {
    std::filesystem::create_directories(scratch / name);
    return scratch / name;
  }
  FileDigests RestoreOk(const SessionLock& lock, const std::string& into) {
    std::filesystem::create_directories(into);
    auto restored = store.Restore(lock, into, static_cast<uid_t>(-1), static_cast<gid_t>(-1));
    BOOST_TEST_REQUIRE(restored.ok(), (restored.ok() ? "" : restored.error().message));
    return *restored;
  }

  TempDir root;
  TempDir scratch;
  SessionStore store;
};

BOOST_FIXTURE_TEST_SUITE(SessionStoreSuite, Fixture)

BOOST_AUTO_TEST_CASE(save_and_restore_round_trip) {
  const std::string ws = Workspace();
  WriteFile(ws + "/a.txt", "alpha");
  WriteFile(ws + "/d/b.txt", "beta");
  WriteFile(ws + "/.sandrun/main.py", "program");  // the launcher's, never saved
  {
    SessionLock lock = LockOk();
    BOOST_TEST_REQUIRE(store.Save(lock, ws).ok());
  }
  SessionLock lock = LockOk();
  const FileDigests digests = RestoreOk(lock, scratch / "out");
  BOOST_TEST(ReadFile(scratch / "out/a.txt") == "alpha");
  BOOST_TEST(ReadFile(scratch / "out/d/b.txt") == "beta");
  BOOST_TEST(!Exists(scratch / "out/.sandrun"));
  BOOST_TEST(digests.size() == 2u);
}

// session_restarted (api/session_continuity.h) rests on this: only the first Lock of a
// session on this store says it created it; another user's session of the same name is its own.
BOOST_AUTO_TEST_CASE(only_the_first_lock_creates_the_session) {
  { BOOST_TEST(LockOk("chat").created()); }
  { BOOST_TEST(!LockOk("chat").created()); }
  { BOOST_TEST(LockOk("chat", "bob").created()); }
  { BOOST_TEST(LockOk("other").created()); }
}

// 100 files truncated to 10 MiB (in a 1 MiB workspace) wrote 1 GB to the
// session store; one file with 60 hard links was stored 60 times.
BOOST_AUTO_TEST_CASE(save_keeps_holes_and_hard_links) {
  const std::string ws = Workspace();
  for (int i = 0; i < 100; ++i) {
    const std::string path = ws + "/sparse" + std::to_string(i);
    WriteFile(path, "x");
    BOOST_TEST_REQUIRE(truncate(path.c_str(), 10 << 20) == 0);
  }
  WriteFile(ws + "/big", std::string(1 << 20, 'b'));
  for (int i = 0; i < 59; ++i) {
    const std::string link = ws + "/links/l" + std::to_string(i);
    std::filesystem::create_directories(ws + "/links");
    BOOST_TEST_REQUIRE(::link((ws + "/big").c_str(), link.c_str()) == 0);
  }
  {
    SessionLock lock = LockOk();
    BOOST_TEST_REQUIRE(store.Save(lock, ws).ok());
  }
  const Usage stored = HostUsage(root.path());
  // 100 one-block files + one 1 MiB inode (+ directories, lock and record): far below the
  // 1 GiB of logical size and the 60 MiB the links would take as copies.
  BOOST_TEST_MESSAGE("session store on disk: " << stored.bytes << " bytes");
  BOOST_TEST(stored.bytes < uint64_t{3} << 20);
  const Usage recorded = store.UserUsage("alice");
  BOOST_TEST(recorded.files == 100u + 1 + 1 + 59);  // files, big, links/, its 59 links
  BOOST_TEST(recorded.bytes < uint64_t{2} << 20);

  SessionLock lock = LockOk();
  const FileDigests digests = RestoreOk(lock, scratch / "out");
  BOOST_TEST(digests.size() == 160u);
  struct stat big, link;
  BOOST_TEST_REQUIRE(stat((scratch / "out/big").c_str(), &big) == 0);
  BOOST_TEST_REQUIRE(stat((scratch / "out/links/l7").c_str(), &link) == 0);
  BOOST_TEST(big.st_ino == link.st_ino);
  BOOST_TEST(big.st_nlink == 60u);
  BOOST_TEST(digests.at("links/l7") == digests.at("big"));
  struct stat sparse;
  BOOST_TEST_REQUIRE(stat((scratch / "out/sparse42").c_str(), &sparse) == 0);
  BOOST_TEST(sparse.st_size == 10 << 20);
  BOOST_TEST(BytesOnDisk(sparse) <= 8192u);
}

// A session over its budget is not saved, and the previous one stays.
BOOST_AUTO_TEST_CASE(session_over_budget_is_not_saved_and_previous_kept) {
  std::string ws = Workspace("v1");
  WriteFile(ws + "/kept.txt", "v1");
  {
    SessionLock lock = LockOk();
    BOOST_TEST_REQUIRE(store.Save(lock, ws, Quota{3, 0}).ok());
  }
  ws = Workspace("v2");
  for (int i = 0; i < 4; ++i) WriteFile(ws + "/f" + std::to_string(i), "x");
  {
    SessionLock lock = LockOk();
    Status s = store.Save(lock, ws, Quota{3, 0});
    BOOST_TEST_REQUIRE(!s.ok());
    BOOST_TEST((s.error().kind == ErrorKind::kOverBudget));
    BOOST_TEST(s.error().message.find("more than 3 files") != std::string::npos, s.error().message);
    Status bytes = store.Save(lock, ws, Quota{0, 8192});  // 4 files of one block each
    BOOST_TEST((bytes.error().kind == ErrorKind::kOverBudget));
  }
  SessionLock lock = LockOk();
  RestoreOk(lock, scratch / "out");
  BOOST_TEST(ReadFile(scratch / "out/kept.txt") == "v1");
  BOOST_TEST(!Exists(scratch / "out/f0"));
  BOOST_TEST(!Exists(lock.dir() + "/files.next"));  // the refused copy is gone
}

BOOST_AUTO_TEST_CASE(sessions_of_one_user_share_the_quota) {
  const std::string ws = Workspace();
  WriteFile(ws + "/a", "a");
  WriteFile(ws + "/b", "b");
  {
    SessionLock lock = LockOk("s1");
    BOOST_TEST_REQUIRE(store.Save(lock, ws, Quota{3, 0}).ok());
  }
  {
    SessionLock lock = LockOk("s2");
    Status s = store.Save(lock, ws, Quota{3, 0});  // 2 + 2 > 3
    BOOST_TEST_REQUIRE(!s.ok());
    BOOST_TEST((s.error().kind == ErrorKind::kOverBudget));
  }
  {
    SessionLock lock = LockOk("s1", "bob");  // another user has a quota of their own
    BOOST_TEST(store.Save(lock, ws, Quota{3, 0}).ok());
  }
  BOOST_TEST(store.UserUsage("alice").files == 2u);
  BOOST_TEST(store.UserUsage("bob").files == 2u);
  BOOST_TEST(store.UserUsage("carol").files == 0u);
}

BOOST_AUTO_TEST_CASE(tree_deeper_than_the_bound_is_refused) {
  const std::string ws = Workspace();
  std::string rel = "d";
  for (int i = 0; i < 70; ++i) rel += "/d";
  WriteFile(ws + "/" + rel + "/deep.txt", "x");
  SessionLock lock = LockOk();
  Status s = store.Save(lock, ws);
  BOOST_TEST_REQUIRE(!s.ok());
  BOOST_TEST((s.error().kind == ErrorKind::kOverBudget));
  BOOST_TEST(s.error().message.find("deeper than 64") != std::string::npos, s.error().message);
}

// The copy is a walk of sys/tree_walk; when it stops at one of the walk's
// limits the Save fails and the session keeps its previous files, never a truncated copy.
BOOST_AUTO_TEST_CASE(copy_stopped_at_a_walk_limit_does_not_replace_the_session) {
  std::string ws = Workspace("v1");
  WriteFile(ws + "/kept.txt", "v1");
  {
    SessionLock lock = LockOk();
    BOOST_TEST_REQUIRE(store.Save(lock, ws).ok());
  }
  ws = Workspace("v2");
  WriteFile(ws + "/a_first.txt", "copied before the stop");  // sorted before "d"
  WriteFile(ws + "/kept.txt", "v2");
  std::string rel = "d";
  for (int i = 0; i < 70; ++i) rel += "/d";
  WriteFile(ws + "/" + rel + "/deep.txt", "x");
  {
    SessionLock lock = LockOk();
    Status s = store.Save(lock, ws);
    BOOST_TEST_REQUIRE(!s.ok());
    BOOST_TEST((s.error().kind == ErrorKind::kOverBudget));
    BOOST_TEST(s.error().message.find("deeper than 64 directories (at d/d/") != std::string::npos,
               s.error().message);
  }
  SessionLock lock = LockOk();
  RestoreOk(lock, scratch / "out");
  BOOST_TEST(ReadFile(scratch / "out/kept.txt") == "v1");
  BOOST_TEST(!Exists(scratch / "out/a_first.txt"));
  BOOST_TEST(!Exists(scratch / "out/d"));
  BOOST_TEST(!Exists(lock.dir() + "/files.next"));
}

// A crash between Save's two renames (files -> files.old, files.next ->
// files) left no `files`; the next Lock made an empty one and the session was lost.
BOOST_AUTO_TEST_CASE(lock_restores_files_old_after_a_crash_between_renames) {
  const std::string ws = Workspace();
  WriteFile(ws + "/precious.txt", "keep me");
  std::string dir;
  {
    SessionLock lock = LockOk();
    BOOST_TEST_REQUIRE(store.Save(lock, ws).ok());
    dir = lock.dir();
  }
  // The state Save leaves when killed right after its first rename.
  BOOST_TEST_REQUIRE(std::rename((dir + "/files").c_str(), (dir + "/files.old").c_str()) == 0);
  std::filesystem::create_directories(dir + "/files.next");
  SessionLock lock = LockOk();
  BOOST_TEST(Exists(dir + "/files"));
  BOOST_TEST(!Exists(dir + "/files.old"));
  RestoreOk(lock, scratch / "out");
  BOOST_TEST(ReadFile(scratch / "out/precious.txt") == "keep me");
}

BOOST_AUTO_TEST_CASE(budget_left_treats_zero_as_unbounded_and_saturates) {
  BOOST_TEST(BudgetLeft({0, 0}, {5, 5}).max_entries == TreeBudget::kUnbounded);
  BOOST_TEST(BudgetLeft({10, 100}, {4, 40}).max_entries == 6u);
  BOOST_TEST(BudgetLeft({10, 100}, {4, 40}).max_bytes == 60u);
  BOOST_TEST(BudgetLeft({10, 100}, {40, 400}).max_entries == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace sandrun::storage
