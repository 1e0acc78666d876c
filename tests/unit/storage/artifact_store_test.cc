// Tests for storage/artifact_store.cc: what lands in the store, how it is named and signed,
// and that a workspace changed behind our back cannot make us copy anything else.
#define BOOST_TEST_MODULE storage_artifact_store
#include "storage/artifact_store.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <string>
#include <thread>
#include <vector>

#include "storage/digest.h"
#include "storage/signed_link.h"
#include "storage/user_store.h"
#include "test_util.h"

namespace sandrun::storage {
namespace {

using testing::EmptyZip;
using testing::Exists;
using testing::ReadFile;
using testing::TempDir;
using testing::TinyPng;
using testing::WriteFile;

constexpr int64_t kNow = 1700000000;
constexpr const char* kXlsx = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet";

struct StoreFixture {
  StoreFixture() {
    options.artifacts_root = state / "artifacts";
    options.public_base_url = "https://sandrun.example";
    options.link_secret = "s3cr3t";
    options.user_dir_key = "user-key";
    options.link_ttl_s = 600;
    options.now_epoch_s = kNow;
  }

  std::string RunDir(const std::string& run_id, const std::string& user = "alice") const {
    return options.artifacts_root + "/" + UserDir(user, options.user_dir_key) + "/" + run_id;
  }

  std::vector<FoundFile> WalkFiles() const {
    auto walk = WalkWorkspace(workspace.path(), {});
    BOOST_TEST_REQUIRE(walk.ok());
    return walk->files;
  }

  PublishResult PublishOk(const std::vector<FoundFile>& files, const std::string& run_id) const {
    auto result = Publish(workspace.path(), files, "alice", run_id, options);
    BOOST_TEST_REQUIRE(result.ok(), (result.ok() ? "" : result.error().message));
    return std::move(result).value();
  }

  const ArtifactFile* Find(const PublishResult& result, const std::string& path) const {
    for (const ArtifactFile& f : result.files) {
      if (f.path == path) return &f;
    }
    return nullptr;
  }

  TempDir workspace;
  TempDir state;
  PublishOptions options;
};

mode_t Mode(const std::string& path) {
  struct stat st {};
  lstat(path.c_str(), &st);
  return st.st_mode & 07777;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(ArtifactStore, StoreFixture)

BOOST_AUTO_TEST_CASE(copies_bytes_and_reports_size_and_sha256) {
  WriteFile(workspace / "data/out.csv", "a,b\n1,2\n");
  const PublishResult result = PublishOk(WalkFiles(), "run-1");
  BOOST_TEST_REQUIRE(result.files.size() == 1u);
  const ArtifactFile& f = result.files[0];
  BOOST_TEST(f.name == "out.csv");
  BOOST_TEST(f.path == "data/out.csv");
  BOOST_TEST(f.size == 8u);
  // sha256sum of "a,b\n1,2\n".
  BOOST_TEST(f.sha256 == "492d5ea496056f1a6a6592241032fab764c321596317930b4fa0e1e8bc3b7470");
  BOOST_TEST(ReadFile(RunDir("run-1") + "/data/out.csv") == "a,b\n1,2\n");
  BOOST_TEST(result.skipped.empty());
}

BOOST_AUTO_TEST_CASE(mime_comes_from_content_and_name) {
  WriteFile(workspace / "plot.png", TinyPng());
  WriteFile(workspace / "noext", TinyPng());
  WriteFile(workspace / "table.csv", "a,b\n1,2\n");
  WriteFile(workspace / "book.xlsx", EmptyZip());
  WriteFile(workspace / "bundle.zip", EmptyZip());
  WriteFile(workspace / "fake.png", "just some text\n");
  const PublishResult result = PublishOk(WalkFiles(), "run-1");
  BOOST_TEST(Find(result, "plot.png")->mime == "image/png");
  BOOST_TEST(Find(result, "noext")->mime == "image/png");
  BOOST_TEST(Find(result, "table.csv")->mime == "text/csv");
  BOOST_TEST(Find(result, "book.xlsx")->mime == kXlsx);
  BOOST_TEST(Find(result, "bundle.zip")->mime == "application/zip");
  BOOST_TEST(Find(result, "fake.png")->mime == "text/plain");  // content wins over the name
}

BOOST_AUTO_TEST_CASE(url_is_encoded_and_signed_like_nginx_expects) {
  WriteFile(workspace / "out dir/my report #1.csv", "x");
  options.public_base_url = "https://sandrun.example/";  // a trailing slash is tolerated
  const PublishResult result = PublishOk(WalkFiles(), "run-1");
  BOOST_TEST_REQUIRE(result.files.size() == 1u);
  const std::string user_dir = UserDir("alice", options.user_dir_key);
  const int64_t expires = kNow + 600;
  const std::string uri = "/files/" + user_dir + "/run-1/out dir/my report #1.csv";
  const std::string expected =
      "https://sandrun.example/files/" + user_dir +
      "/run-1/out%20dir/my%20report%20%231.csv?md5=" + SecureLinkMd5(uri, expires, "s3cr3t") +
      "&expires=" + std::to_string(expires);
  BOOST_TEST(result.files[0].url == expected);
  BOOST_TEST(result.files[0].expires_at == expires);
  BOOST_TEST(result.files[0].url.find("alice") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(leaves_no_temp_files_and_sets_permissions_despite_umask) {
  WriteFile(workspace / "a/b/c.txt", "x");
  WriteFile(workspace / "d.txt", "y");
  const mode_t old_umask = umask(077);
  const PublishResult result = PublishOk(WalkFiles(), "run-1");
  umask(old_umask);
  BOOST_TEST(result.files.size() == 2u);
  for (const std::string& rel : testing::ListTree(options.artifacts_root)) {
    BOOST_TEST(rel.find(".tmp-") == std::string::npos, rel);
  }
  const std::string run = RunDir("run-1");
  BOOST_TEST(Mode(run + "/a/b/c.txt") == 0644u);
  BOOST_TEST(Mode(run + "/d.txt") == 0644u);
  BOOST_TEST(Mode(run + "/a/b") == 0755u);
  BOOST_TEST(Mode(run) == 0755u);
  BOOST_TEST(Mode(options.artifacts_root + "/" + UserDir("alice", options.user_dir_key)) == 0755u);
}

BOOST_AUTO_TEST_CASE(component_replaced_by_symlink_is_not_followed) {
  WriteFile(workspace / "data/out.csv", "mine");
  const std::vector<FoundFile> files = WalkFiles();
  // Between walk and publish, data/ becomes a symlink to a directory with a file of the same
  // name: following it would publish "SECRET".
  WriteFile(state / "outside/out.csv", "SECRET");
  BOOST_TEST_REQUIRE(rename((workspace / "data").c_str(), (workspace / "data_real").c_str()) == 0);
  BOOST_TEST_REQUIRE(symlink((state / "outside").c_str(), (workspace / "data").c_str()) == 0);
  const PublishResult result = PublishOk(files, "run-1");
  BOOST_TEST(result.files.empty());
  BOOST_TEST_REQUIRE(result.skipped.size() == 1u);
  BOOST_TEST(result.skipped[0].path == "data/out.csv");
  BOOST_TEST(result.skipped[0].reason == "symlink");
  BOOST_TEST(!Exists(RunDir("run-1") + "/data/out.csv"));
}

BOOST_AUTO_TEST_CASE(file_replaced_by_symlink_is_not_followed) {
  WriteFile(workspace / "report.txt", "mine");
  const std::vector<FoundFile> files = WalkFiles();
  BOOST_TEST_REQUIRE(unlink((workspace / "report.txt").c_str()) == 0);
  BOOST_TEST_REQUIRE(symlink("/etc/passwd", (workspace / "report.txt").c_str()) == 0);
  const PublishResult result = PublishOk(files, "run-1");
  BOOST_TEST(result.files.empty());
  BOOST_TEST_REQUIRE(result.skipped.size() == 1u);
  BOOST_TEST(result.skipped[0].reason == "symlink");
  BOOST_TEST(!Exists(RunDir("run-1") + "/report.txt"));
}

BOOST_AUTO_TEST_CASE(file_replaced_by_fifo_or_removed_is_skipped_without_blocking) {
  WriteFile(workspace / "fifo.txt", "x");
  WriteFile(workspace / "gone.txt", "x");
  const std::vector<FoundFile> files = WalkFiles();
  BOOST_TEST_REQUIRE(unlink((workspace / "fifo.txt").c_str()) == 0);
  BOOST_TEST_REQUIRE(mkfifo((workspace / "fifo.txt").c_str(), 0644) == 0);
  BOOST_TEST_REQUIRE(unlink((workspace / "gone.txt").c_str()) == 0);
  const PublishResult result = PublishOk(files, "run-1");
  BOOST_TEST(result.files.empty());
  BOOST_TEST_REQUIRE(result.skipped.size() == 2u);
  BOOST_TEST(result.skipped[0].reason == "not_regular");
  BOOST_TEST(result.skipped[1].reason == "not_regular");
  BOOST_TEST(!Exists(RunDir("run-1")));  // nothing published: no empty run directory
}

BOOST_AUTO_TEST_CASE(file_grown_past_walked_size_is_skipped) {
  WriteFile(workspace / "log.txt", "short");
  const std::vector<FoundFile> files = WalkFiles();
  WriteFile(workspace / "log.txt", std::string(200000, 'x'));
  const PublishResult result = PublishOk(files, "run-1");
  BOOST_TEST(result.files.empty());
  BOOST_TEST_REQUIRE(result.skipped.size() == 1u);
  BOOST_TEST(result.skipped[0].reason == "too_large");
  BOOST_TEST(testing::ListTree(options.artifacts_root).size() <= 1u);  // at most the user dir
}

BOOST_AUTO_TEST_CASE(paths_not_from_the_walk_are_refused) {
  WriteFile(state / "escape", "SECRET");
  const std::vector<FoundFile> files = {
      {"../escape", 6}, {"/etc/passwd", 100000}, {"a//b", 1}, {"./a", 1}, {"", 0}, {"a/", 1}};
  const PublishResult result = PublishOk(files, "run-1");
  BOOST_TEST(result.files.empty());
  BOOST_TEST_REQUIRE(result.skipped.size() == files.size());
  for (const SkippedFile& s : result.skipped) BOOST_TEST(s.reason == "ignored", s.path);
}

BOOST_AUTO_TEST_CASE(hostile_names_are_published_and_encoded) {
  const std::vector<std::string> names = {"new\nline", "bad\xff", "-rf", std::string(255, 'n')};
  for (const std::string& name : names) WriteFile(workspace / name, name);
  const PublishResult result = PublishOk(WalkFiles(), "run-1");
  BOOST_TEST_REQUIRE(result.files.size() == names.size());
  for (const std::string& name : names) {
    BOOST_TEST(ReadFile(RunDir("run-1") + "/" + name) == name);
  }
  BOOST_TEST(Find(result, "new\nline")->url.find("/new%0Aline?md5=") != std::string::npos);
  BOOST_TEST(Find(result, "bad\xff")->url.find("/bad%FF?md5=") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(write_error_removes_the_whole_run) {
  WriteFile(workspace / "a.txt", "small");
  WriteFile(workspace / "b.bin", std::string(5000, 'x'));
  const std::vector<FoundFile> files = WalkFiles();
  // RLIMIT_FSIZE makes the second copy fail with EFBIG, like a full disk would with ENOSPC,
  // without needing root to mount a small file system. SIGXFSZ is ignored so write(2)
  // returns the error instead of killing the test.
  rlimit old_limit{};
  BOOST_TEST_REQUIRE(getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
  rlimit limit = old_limit;
  limit.rlim_cur = 1000;
  auto old_handler = signal(SIGXFSZ, SIG_IGN);
  BOOST_TEST_REQUIRE(setrlimit(RLIMIT_FSIZE, &limit) == 0);
  auto result = Publish(workspace.path(), files, "alice", "run-1", options);
  setrlimit(RLIMIT_FSIZE, &old_limit);
  signal(SIGXFSZ, old_handler);
  BOOST_TEST_REQUIRE(!result.ok());
  // The shared copy routine (file_copy.h) calls a full destination "file_limit".
  BOOST_TEST((result.error().kind == ErrorKind::kFileLimit));
  BOOST_TEST(result.error().message.find(RunDir("run-1") + "/b.bin") != std::string::npos,
             result.error().message);
  BOOST_TEST(result.error().message.find("File too large") != std::string::npos);
  BOOST_TEST(!Exists(RunDir("run-1")));  // a.txt, published first, is gone too
}

BOOST_AUTO_TEST_CASE(concurrent_publishes_from_several_threads) {
  WriteFile(workspace / "plot.png", TinyPng());
  WriteFile(workspace / "table.csv", "a,b\n1,2\n");
  const std::vector<FoundFile> files = WalkFiles();
  constexpr int kThreads = 8;
  std::vector<std::string> errors(kThreads);
  std::vector<PublishResult> results(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      auto r = Publish(workspace.path(), files, "alice", "run-" + std::to_string(i), options);
      if (r.ok()) {
        results[i] = std::move(r).value();
      } else {
        errors[i] = r.error().message;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    BOOST_TEST(errors[i].empty(), errors[i]);
    BOOST_TEST_REQUIRE(results[i].files.size() == 2u);
    BOOST_TEST(Find(results[i], "plot.png")->mime == "image/png");
    BOOST_TEST(Find(results[i], "table.csv")->mime == "text/csv");
    BOOST_TEST(ReadFile(RunDir("run-" + std::to_string(i)) + "/plot.png") == TinyPng());
  }
}

BOOST_AUTO_TEST_CASE(users_get_separate_directories) {
  WriteFile(workspace / "x.txt", "x");
  const std::vector<FoundFile> files = WalkFiles();
  BOOST_TEST_REQUIRE(Publish(workspace.path(), files, "alice", "run-1", options).ok());
  BOOST_TEST_REQUIRE(Publish(workspace.path(), files, "bob", "run-2", options).ok());
  BOOST_TEST(Exists(RunDir("run-1", "alice") + "/x.txt"));
  BOOST_TEST(Exists(RunDir("run-2", "bob") + "/x.txt"));
  BOOST_TEST(!Exists(RunDir("run-2", "alice")));
}

BOOST_AUTO_TEST_CASE(bad_run_id_is_refused) {
  WriteFile(workspace / "x.txt", "x");
  const std::vector<FoundFile> files = WalkFiles();
  for (const std::string run_id : {"", ".", "..", "../x", "a/b"}) {
    auto result = Publish(workspace.path(), files, "alice", run_id, options);
    BOOST_TEST(!result.ok(), run_id);
  }
  BOOST_TEST(!Exists(options.artifacts_root + "/x"));
}

BOOST_AUTO_TEST_CASE(nothing_to_publish_creates_nothing) {
  const PublishResult result = PublishOk({}, "run-1");
  BOOST_TEST(result.files.empty());
  BOOST_TEST(!Exists(options.artifacts_root));
}

// ---- Quotas, eviction, expiry (DESIGN.md §4) -------------------------------------------

BOOST_AUTO_TEST_CASE(links_expire_no_later_than_their_files) {
  WriteFile(workspace / "x.txt", "x");
  options.link_ttl_s = 600;
  options.max_age_s = 60;
  const PublishResult result = PublishOk(WalkFiles(), "run-1");
  BOOST_TEST_REQUIRE(result.files.size() == 1u);
  BOOST_TEST(result.files[0].expires_at == kNow + 60);
  BOOST_TEST(result.files[0].url.find("&expires=" + std::to_string(kNow + 60)) !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(run_record_is_kept_out_of_reach_of_nginx) {
  WriteFile(workspace / "x.txt", "xyz");
  PublishOk(WalkFiles(), "run-1");
  const std::string record = RunDir("run-1") + "/.sandrun/run";
  const auto parsed = ParseRunRecord(ReadFile(record));
  BOOST_TEST_REQUIRE(parsed.has_value());
  BOOST_TEST(parsed->created_at == kNow);
  BOOST_TEST(parsed->usage.files == 1u);
  // Bytes on disk (a block), not st_size: quotas count what the host really spends.
  struct stat st;
  BOOST_TEST_REQUIRE(stat((RunDir("run-1") + "/x.txt").c_str(), &st) == 0);
  BOOST_TEST(parsed->usage.bytes == static_cast<uint64_t>(st.st_blocks) * 512);
  BOOST_TEST(parsed->usage.bytes > 0u);
  BOOST_TEST(Mode(RunDir("run-1") + "/.sandrun") == 0700u);  // nginx's workers cannot read it
}

BOOST_AUTO_TEST_CASE(workspace_path_under_the_record_directory_is_refused) {
  WriteFile(workspace / "x.txt", "x");
  WriteFile(workspace / ".sandrun/run",
            "sandrun-run 1\ncreated_at 0\nlive_ns 0\nfiles 0\nbytes 0\n");
  std::vector<FoundFile> files = WalkFiles();  // the walk ignores .sandrun/ ...
  files.push_back({".sandrun/run", 40});       // ... a caller that does not is refused it
  const PublishResult result = PublishOk(files, "run-1");
  BOOST_TEST_REQUIRE(result.files.size() == 1u);
  const auto parsed = ParseRunRecord(ReadFile(RunDir("run-1") + "/.sandrun/run"));
  BOOST_TEST_REQUIRE(parsed.has_value());
  BOOST_TEST(parsed->created_at == kNow);
}

BOOST_AUTO_TEST_CASE(run_id_is_published_once) {
  WriteFile(workspace / "x.txt", "x");
  const std::vector<FoundFile> files = WalkFiles();
  PublishOk(files, "run-1");
  auto again = Publish(workspace.path(), files, "alice", "run-1", options);
  BOOST_TEST_REQUIRE(!again.ok());
  BOOST_TEST(again.error().message.find("already published") != std::string::npos);
  BOOST_TEST(ReadFile(RunDir("run-1") + "/x.txt") == "x");
}

BOOST_AUTO_TEST_CASE(run_over_the_file_quota_is_refused_whole) {
  options.quota = {3, 0};
  WriteFile(workspace / "keep.txt", "k");
  PublishOk(WalkFiles(), "older");
  for (int i = 0; i < 4; ++i) WriteFile(workspace / ("f" + std::to_string(i)), "x");
  const PublishResult result = PublishOk(WalkFiles(), "big");
  BOOST_TEST(result.over_quota);
  BOOST_TEST(result.files.empty());
  BOOST_TEST(result.requested.files == 5u);
  BOOST_TEST_REQUIRE(result.skipped.size() == 5u);
  for (const SkippedFile& s : result.skipped) BOOST_TEST(s.reason == "quota", s.path);
  BOOST_TEST(result.evicted.empty());
  BOOST_TEST(!Exists(RunDir("big")));
  BOOST_TEST(Exists(RunDir("older") + "/keep.txt"));  // nothing evicted for a refused run
}

// Two 9 MiB sparse files took 18 MiB of the store. Copies keep holes, and
// the quota counts the blocks used, so they fit a 1 MiB quota.
BOOST_AUTO_TEST_CASE(sparse_files_are_published_sparse_and_counted_by_blocks) {
  options.quota = {0, 1 << 20};
  for (const char* name : {"s1.bin", "s2.bin"}) {
    WriteFile(workspace / name, "head");
    BOOST_TEST_REQUIRE(truncate((workspace / name).c_str(), 9 << 20) == 0);
  }
  const PublishResult result = PublishOk(WalkFiles(), "sparse");
  BOOST_TEST_REQUIRE(result.files.size() == 2u);
  BOOST_TEST(!result.over_quota);
  BOOST_TEST(result.files[0].size == uint64_t{9} << 20);
  uint64_t on_disk = 0;
  for (const char* name : {"/s1.bin", "/s2.bin"}) {
    struct stat st;
    BOOST_TEST_REQUIRE(stat((RunDir("sparse") + name).c_str(), &st) == 0);
    on_disk += static_cast<uint64_t>(st.st_blocks) * 512;
    BOOST_TEST(st.st_size == 9 << 20);
  }
  BOOST_TEST_MESSAGE("two 9 MiB sparse files published: " << on_disk << " bytes on disk");
  BOOST_TEST(on_disk < uint64_t{64} << 10);
  BOOST_TEST(result.stored.bytes == on_disk);
  const std::string content = ReadFile(RunDir("sparse") + "/s1.bin");
  BOOST_TEST((content.substr(0, 4) == "head" && content.size() == size_t{9} << 20));
  Sha256 sha;
  sha.Update(content.data(), content.size());
  BOOST_TEST(sha.FinalHex() == result.files[0].sha256);  // holes hashed as zeros
}

// The user's sessions count against the quota and are never evicted.
BOOST_AUTO_TEST_CASE(reserved_usage_counts_against_the_quota) {
  options.quota = {3, 0};
  options.reserved = {2, 0};
  WriteFile(workspace / "a", "a");
  WriteFile(workspace / "b", "b");
  const PublishResult result = PublishOk(WalkFiles(), "two");
  BOOST_TEST(result.over_quota);  // 2 + 2 reserved > 3
  options.reserved = {1, 0};
  BOOST_TEST(!PublishOk(WalkFiles(), "fits").over_quota);
}

BOOST_AUTO_TEST_CASE(run_over_the_byte_quota_is_refused_whole) {
  options.quota = {0, 1000};
  WriteFile(workspace / "a.bin", std::string(600, 'a'));
  WriteFile(workspace / "b.bin", std::string(600, 'b'));
  const PublishResult result = PublishOk(WalkFiles(), "big");
  BOOST_TEST(result.over_quota);
  BOOST_TEST(result.skipped.size() == 2u);
  BOOST_TEST(testing::ListTree(options.artifacts_root).empty());
}

BOOST_AUTO_TEST_CASE(evicts_oldest_runs_to_make_room) {
  options.quota = {4, 0};
  for (int i = 0; i < 3; ++i) {
    WriteFile(workspace / "a.txt", "run " + std::to_string(i));
    WriteFile(workspace / "b.txt", "run " + std::to_string(i));
    options.now_epoch_s = kNow + i;
    const PublishResult result = PublishOk(WalkFiles(), "run-" + std::to_string(i));
    BOOST_TEST(result.files.size() == 2u);
    BOOST_TEST(result.evicted ==
               (i < 2 ? std::vector<std::string>{} : std::vector<std::string>{"run-0"}));
  }
  BOOST_TEST(!Exists(RunDir("run-0")));
  BOOST_TEST(ReadFile(RunDir("run-1") + "/a.txt") == "run 1");
  BOOST_TEST(ReadFile(RunDir("run-2") + "/a.txt") == "run 2");
  // No trash or staging directory is left behind.
  BOOST_TEST(
      testing::ListTree(options.artifacts_root + "/" + UserDir("alice", "user-key")).size() ==
      2u * 5u);  // two runs: dir, a.txt, b.txt, .sandrun, .sandrun/run
}

BOOST_AUTO_TEST_CASE(runs_of_one_second_are_evicted_in_the_order_they_were_published) {
  options.quota = {2, 0};  // the clock stands still: every run is published "at once"
  for (const char* id : {"m", "a", "z"}) {
    WriteFile(workspace / "x.txt", id);
    PublishOk(WalkFiles(), id);
  }
  // Not by run id ("a" < "m"): "m" went live first.
  BOOST_TEST(!Exists(RunDir("m")));
  BOOST_TEST(Exists(RunDir("a") + "/x.txt"));
  BOOST_TEST(Exists(RunDir("z") + "/x.txt"));
}

BOOST_AUTO_TEST_CASE(eviction_never_touches_another_user) {
  options.quota = {1, 0};
  WriteFile(workspace / "x.txt", "x");
  const std::vector<FoundFile> files = WalkFiles();
  BOOST_TEST_REQUIRE(Publish(workspace.path(), files, "bob", "bob-run", options).ok());
  for (int i = 0; i < 3; ++i) {
    options.now_epoch_s = kNow + 1 + i;
    auto r = Publish(workspace.path(), files, "alice", "alice-" + std::to_string(i), options);
    BOOST_TEST_REQUIRE(r.ok());
  }
  BOOST_TEST(Exists(RunDir("bob-run", "bob") + "/x.txt"));
  BOOST_TEST(Exists(RunDir("alice-2", "alice") + "/x.txt"));
  BOOST_TEST(!Exists(RunDir("alice-1", "alice")));
}

BOOST_AUTO_TEST_CASE(write_error_evicts_nothing) {
  options.quota = {2, 0};
  WriteFile(workspace / "old.txt", "o");
  PublishOk(WalkFiles(), "older");
  TempDir other;
  WriteFile(other / "a.txt", "small");
  WriteFile(other / "b.bin", std::string(5000, 'x'));
  auto walk = WalkWorkspace(other.path(), {});
  BOOST_TEST_REQUIRE(walk.ok());
  rlimit old_limit{};
  BOOST_TEST_REQUIRE(getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
  rlimit limit = old_limit;
  limit.rlim_cur = 1000;
  auto old_handler = signal(SIGXFSZ, SIG_IGN);
  BOOST_TEST_REQUIRE(setrlimit(RLIMIT_FSIZE, &limit) == 0);
  auto result = Publish(other.path(), walk->files, "alice", "failing", options);
  setrlimit(RLIMIT_FSIZE, &old_limit);
  signal(SIGXFSZ, old_handler);
  BOOST_TEST_REQUIRE(!result.ok());
  BOOST_TEST(!Exists(RunDir("failing")));
  BOOST_TEST(Exists(RunDir("older") + "/old.txt"));
  for (const std::string& rel : testing::ListTree(options.artifacts_root)) {
    BOOST_TEST(rel.find(".staging-") == std::string::npos, rel);
  }
}

BOOST_AUTO_TEST_CASE(concurrent_publishes_of_one_user_stay_within_the_quota) {
  // Eight runs of two files each race for a four-file quota: the user's lock makes each
  // one see the others, so at most two runs (the newest to go live) remain.
  options.quota = {4, 0};
  WriteFile(workspace / "a.txt", "a");
  WriteFile(workspace / "b.txt", "b");
  const std::vector<FoundFile> files = WalkFiles();
  constexpr int kThreads = 8;
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      auto r = Publish(workspace.path(), files, "alice", "run-" + std::to_string(i), options);
      if (!r.ok()) errors[i] = r.error().message;
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) BOOST_TEST(e.empty(), e);
  int runs = 0;
  for (int i = 0; i < kThreads; ++i) runs += Exists(RunDir("run-" + std::to_string(i))) ? 1 : 0;
  BOOST_TEST(runs == 2);
  auto scanned =
      ScanRuns(open((options.artifacts_root + "/" + UserDir("alice", "user-key")).c_str(),
                    O_RDONLY | O_DIRECTORY | O_CLOEXEC),
               "alice");
  BOOST_TEST_REQUIRE(scanned.ok());
  Usage total;
  for (const RunInfo& run : *scanned) total += run.usage;
  BOOST_TEST(total.files == 4u);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::storage
