// Tests for storage/outputs.cc and the ExtraSource form of Publish (artifact_store.h): the
// outputs area is the program's, so names are looked up without following symlinks, reads are
// bounded, and shown figures land in the same run as the workspace's files.
#define BOOST_TEST_MODULE storage_outputs
#include "storage/outputs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <string>

#include "storage/artifact_store.h"
#include "storage/signed_link.h"
#include "storage/user_store.h"
#include "test_util.h"

namespace sandrun::storage {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::TinyPng;
using testing::WriteFile;

}  // namespace

BOOST_AUTO_TEST_SUITE(Outputs)

BOOST_AUTO_TEST_CASE(reads_a_bounded_manifest_and_never_follows_a_symlink) {
  TempDir out;
  bool truncated = true;
  auto missing = ReadOutputFile(out.path(), "displays.jsonl", 10, &truncated);
  BOOST_REQUIRE(missing.ok());
  BOOST_TEST(*missing == "");
  BOOST_TEST(!truncated);
  WriteFile(out / "displays.jsonl", "0123456789abcdef");
  auto cut = ReadOutputFile(out.path(), "displays.jsonl", 10, &truncated);
  BOOST_REQUIRE(cut.ok());
  BOOST_TEST(*cut == "0123456789");
  BOOST_TEST(truncated);
  WriteFile(out / "secret", "host file");
  BOOST_REQUIRE(symlink((out / "secret").c_str(), (out / "link.jsonl").c_str()) == 0);
  BOOST_TEST(!ReadOutputFile(out.path(), "link.jsonl", 10, &truncated).ok());
  BOOST_REQUIRE(mkfifo((out / "fifo.jsonl").c_str(), 0600) == 0);
  BOOST_TEST(!ReadOutputFile(out.path(), "fifo.jsonl", 10, &truncated).ok());
  BOOST_TEST(!ReadOutputFile(out.path(), "../secret", 10, &truncated).ok());
}

BOOST_AUTO_TEST_CASE(scan_lists_regular_files_and_skips_the_rest) {
  TempDir out;
  WriteFile(out / "figure-1.png", TinyPng());
  WriteFile(out / "big.png", std::string(2000, 'x'));
  BOOST_REQUIRE(symlink("/etc/passwd", (out / "evil.png").c_str()) == 0);
  BOOST_REQUIRE(mkdir((out / "dir.png").c_str(), 0755) == 0);
  auto scan = ScanOutputFiles(
      out.path(), {"figure-1.png", "big.png", "evil.png", "dir.png", "gone.png", "a/b.png"}, 1000);
  BOOST_REQUIRE(scan.ok());
  BOOST_REQUIRE(scan->files.size() == 1u);
  BOOST_TEST(scan->files[0].path == "figure-1.png");
  BOOST_TEST(scan->files[0].size == TinyPng().size());
  std::string skipped;
  for (const auto& s : scan->skipped) skipped += s.path + ":" + s.reason + " ";
  BOOST_TEST(skipped == "big.png:too_large evil.png:symlink dir.png:not_regular ");
}

BOOST_AUTO_TEST_CASE(publishes_outputs_beside_the_workspace_in_one_run) {
  TempDir workspace, out, state;
  WriteFile(workspace / "data.csv", "a,b\n");
  WriteFile(out / "figure-1.png", TinyPng());
  PublishOptions options;
  options.artifacts_root = state / "artifacts";
  options.public_base_url = "https://sandrun.example";
  options.link_secret = "s3cr3t";
  options.user_dir_key = "k";
  options.now_epoch_s = 1700000000;
  auto walk = WalkWorkspace(workspace.path(), {});
  BOOST_REQUIRE(walk.ok());
  auto scan = ScanOutputFiles(out.path(), {"figure-1.png"}, 1 << 20);
  BOOST_REQUIRE(scan.ok());
  ExtraSource extra{out.path(), {{"figure-1.png", scan->files[0]}}};
  extra.files[0].file.path = "shown/figure-1.png";
  const std::string run_id = "0123456789abcdef0123456789abcdef";
  auto published = Publish(workspace.path(), walk->files, extra, "alice", run_id, options);
  BOOST_REQUIRE(published.ok());
  BOOST_REQUIRE(published->files.size() == 2u);
  BOOST_TEST(published->files[0].path == "data.csv");
  BOOST_TEST(published->files[1].path == "shown/figure-1.png");
  BOOST_TEST(published->files[1].name == "figure-1.png");
  BOOST_TEST(published->files[1].mime == "image/png");
  BOOST_TEST(published->files[1].url.find("/" + run_id + "/shown/figure-1.png?md5=") !=
             std::string::npos);
  const std::string run_dir =
      options.artifacts_root + "/" + UserDir("alice", options.user_dir_key) + "/" + run_id;
  BOOST_TEST(ReadFile(run_dir + "/shown/figure-1.png") == TinyPng());
  BOOST_TEST(published->requested.files == 2u);
}

BOOST_AUTO_TEST_CASE(outputs_alone_make_a_run) {
  TempDir workspace, out, state;
  WriteFile(out / "figure-1.png", TinyPng());
  PublishOptions options;
  options.artifacts_root = state / "artifacts";
  options.link_secret = "s";
  options.user_dir_key = "k";
  auto scan = ScanOutputFiles(out.path(), {"figure-1.png"}, 1 << 20);
  BOOST_REQUIRE(scan.ok());
  ExtraSource extra{out.path(), {{"figure-1.png", scan->files[0]}}};
  auto published =
      Publish(workspace.path(), {}, extra, "bob", "fedcba9876543210fedcba9876543210", options);
  BOOST_REQUIRE(published.ok());
  BOOST_REQUIRE(published->files.size() == 1u);
  BOOST_TEST(published->files[0].path == "figure-1.png");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::storage
