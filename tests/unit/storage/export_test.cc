// Tests for storage/export.cc: the workspace walk never follows a symlink, never opens a FIFO,
// and stays bounded on hostile trees.
#define BOOST_TEST_MODULE storage_export
#include "storage/export.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "storage/fs.h"
#include "storage/walk_limits.h"
#include "test_util.h"

namespace sandrun::storage {
namespace {

using testing::TempDir;
using testing::WriteFile;

std::vector<std::string> Paths(const std::vector<FoundFile>& files) {
  std::vector<std::string> out;
  for (const FoundFile& f : files) out.push_back(f.path);
  return out;
}

// The reason `path` was skipped for, or "" when it was not.
std::string ReasonFor(const WalkResult& result, const std::string& path) {
  for (const SkippedFile& s : result.skipped) {
    if (s.path == path) return s.reason;
  }
  return "";
}

bool Mentions(const WalkResult& result, const std::string& prefix) {
  for (const FoundFile& f : result.files) {
    if (f.path.rfind(prefix, 0) == 0) return true;
  }
  for (const SkippedFile& s : result.skipped) {
    if (s.path.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

WalkResult Walk(const TempDir& dir, const ExportOptions& options = {}) {
  auto result = WalkWorkspace(dir.path(), options);
  BOOST_TEST_REQUIRE(result.ok(), (result.ok() ? "" : result.error().message));
  return std::move(result).value();
}

void BindSocket(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  BOOST_TEST_REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  BOOST_TEST_REQUIRE(path.size() < sizeof addr.sun_path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  BOOST_TEST_REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  close(fd);  // the socket inode stays in the directory
}

}  // namespace

BOOST_AUTO_TEST_SUITE(Export)

BOOST_AUTO_TEST_CASE(lists_regular_files_in_sorted_order_with_sizes) {
  TempDir dir;
  WriteFile(dir / "b.txt", "bb");
  WriteFile(dir / "a/z.csv", "1,2\n");
  WriteFile(dir / "a/deep/er/x.bin", std::string(1000, 'x'));
  WriteFile(dir / "a-b", "");
  const WalkResult result = Walk(dir);
  // Byte order of the whole path: "a-b" < "a/..." because '-' (0x2d) < '/' (0x2f).
  const std::vector<std::string> expected = {"a-b", "a/deep/er/x.bin", "a/z.csv", "b.txt"};
  BOOST_TEST(Paths(result.files) == expected, boost::test_tools::per_element());
  BOOST_TEST(result.files[1].size == 1000u);
  BOOST_TEST(result.files[0].size == 0u);
  BOOST_TEST(result.skipped.empty());
  BOOST_TEST(!result.limit_hit);
}

BOOST_AUTO_TEST_CASE(skips_symlinks_without_following_them) {
  TempDir dir;
  WriteFile(dir / "real.txt", "ok");
  BOOST_TEST_REQUIRE(symlink("/etc/passwd", (dir / "passwd").c_str()) == 0);
  BOOST_TEST_REQUIRE(symlink("/etc", (dir / "etc").c_str()) == 0);
  std::filesystem::create_directory(dir / "sub");
  BOOST_TEST_REQUIRE(symlink("..", (dir / "sub/up").c_str()) == 0);
  const WalkResult result = Walk(dir);
  BOOST_TEST(Paths(result.files) == std::vector<std::string>{"real.txt"},
             boost::test_tools::per_element());
  BOOST_TEST(ReasonFor(result, "passwd") == "symlink");
  BOOST_TEST(ReasonFor(result, "etc") == "symlink");
  BOOST_TEST(ReasonFor(result, "sub/up") == "symlink");
  BOOST_TEST(!Mentions(result, "etc/"));  // the linked directory was not entered
  BOOST_TEST(!result.limit_hit);
}

BOOST_AUTO_TEST_CASE(skips_fifo_and_socket_without_opening_them) {
  TempDir dir;
  // Opening this FIFO for reading would block forever (no writer): the walk finishing at all
  // is part of the assertion.
  BOOST_TEST_REQUIRE(mkfifo((dir / "fifo").c_str(), 0644) == 0);
  BindSocket(dir / "sock");
  WriteFile(dir / "out.txt", "x");
  const WalkResult result = Walk(dir);
  BOOST_TEST(Paths(result.files) == std::vector<std::string>{"out.txt"},
             boost::test_tools::per_element());
  BOOST_TEST(ReasonFor(result, "fifo") == "not_regular");
  BOOST_TEST(ReasonFor(result, "sock") == "not_regular");
}

BOOST_AUTO_TEST_CASE(skips_device_nodes) {
  TempDir dir;
  // mknod needs CAP_MKNOD (root on the CI machines); without it there is nothing to test,
  // and ctest counts the case as skipped (its own entry, unit.storage.export_devices, matches
  // this line with SKIP_REGULAR_EXPRESSION).
  if (mknod((dir / "null").c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
    std::cout << "SKIPPED: mknod failed (" << std::strerror(errno) << "), needs CAP_MKNOD"
              << std::endl;
    return;
  }
  const WalkResult result = Walk(dir);
  BOOST_TEST(result.files.empty());
  BOOST_TEST(ReasonFor(result, "null") == "not_regular");
}

BOOST_AUTO_TEST_CASE(ignored_dirs_are_one_entry_and_never_counted) {
  TempDir dir;
  for (int i = 0; i < 1000; ++i) WriteFile(dir / (".cache/pip/f" + std::to_string(i)), "x");
  WriteFile(dir / "pkg/__pycache__/mod.cpython-311.pyc", "x");
  WriteFile(dir / "__pycache__/top.pyc", "x");
  WriteFile(dir / ".local/lib/big", std::string(5000, 'x'));
  WriteFile(dir / "venv/lib/python3.11/site-packages/yfinance/__init__.py", "x");
  WriteFile(dir / "pkg/mod.py", "x");
  WriteFile(dir / "main.txt", "x");
  ExportOptions options;
  options.max_files = 2;
  options.max_file_bytes = 100;
  const WalkResult result = Walk(dir, options);
  BOOST_TEST(Paths(result.files) == (std::vector<std::string>{"main.txt", "pkg/mod.py"}),
             boost::test_tools::per_element());
  BOOST_TEST(ReasonFor(result, ".cache") == "ignored");
  BOOST_TEST(ReasonFor(result, ".local") == "ignored");
  BOOST_TEST(ReasonFor(result, "__pycache__") == "ignored");
  BOOST_TEST(ReasonFor(result, "pkg/__pycache__") == "ignored");
  BOOST_TEST(ReasonFor(result, "venv/lib/python3.11/site-packages") == "ignored");
  BOOST_TEST(result.skipped.size() == 5u);  // one entry per directory, none for their files
  BOOST_TEST(!result.limit_hit);
}

BOOST_AUTO_TEST_CASE(an_ignored_dir_of_empty_dirs_is_not_listed) {
  TempDir dir;
  // What the stateful kernel makes for pip: listed in every answer of the session before.
  std::filesystem::create_directories(dir / ".local/lib/python3.11/site-packages");
  std::filesystem::create_directories(dir / ".cache");
  // Something in it, at any depth: listed as before (a symlink counts as something).
  WriteFile(dir / "pkg/__pycache__/a/b/c/mod.pyc", "x");
  std::filesystem::create_directories(dir / ".config/x");
  std::filesystem::create_symlink("/etc", dir / ".config/x/link");
  // Deeper than the look goes, or more names than it reads: listed, to be safe.
  std::filesystem::create_directories(dir / ".npm/1/2/3/4/5/6/7/8/9");
  for (int i = 0; i < 70; ++i)
    std::filesystem::create_directories(dir / ("site-packages/" + std::to_string(i)));
  WriteFile(dir / "out.txt", "x");
  const WalkResult result = Walk(dir);
  BOOST_TEST(Paths(result.files) == std::vector<std::string>{"out.txt"},
             boost::test_tools::per_element());
  BOOST_TEST(ReasonFor(result, ".local") == "");
  BOOST_TEST(ReasonFor(result, ".cache") == "");
  BOOST_TEST(ReasonFor(result, "pkg/__pycache__") == "ignored");
  BOOST_TEST(ReasonFor(result, ".config") == "ignored");
  BOOST_TEST(ReasonFor(result, ".npm") == "ignored");
  BOOST_TEST(ReasonFor(result, "site-packages") == "ignored");
  BOOST_TEST(result.skipped.size() == 4u);
}

BOOST_AUTO_TEST_CASE(unlisted_dirs_are_neither_exported_counted_nor_listed) {
  TempDir dir;
  WriteFile(dir / ".sandrun/0/main.py", "print(1)");
  WriteFile(dir / "sub/.sandrun/kept.txt", "x");  // only the top-level one is the launcher's
  WriteFile(dir / "out.txt", "x");
  ExportOptions options;
  options.max_files = 2;
  const WalkResult result = Walk(dir, options);
  BOOST_TEST(Paths(result.files) == (std::vector<std::string>{"out.txt", "sub/.sandrun/kept.txt"}),
             boost::test_tools::per_element());
  BOOST_TEST(result.skipped.empty());
}

BOOST_AUTO_TEST_CASE(ignored_dirs_match_a_relative_path_prefix) {
  TempDir dir;
  WriteFile(dir / "data/tmp/a", "x");
  WriteFile(dir / "other/tmp/b", "x");
  ExportOptions options;
  options.ignored_dirs = {"data/tmp/"};
  const WalkResult result = Walk(dir, options);
  BOOST_TEST(Paths(result.files) == std::vector<std::string>{"other/tmp/b"},
             boost::test_tools::per_element());
  BOOST_TEST(ReasonFor(result, "data/tmp") == "ignored");
}

BOOST_AUTO_TEST_CASE(too_large_files_are_skipped_and_set_limit_hit) {
  TempDir dir;
  WriteFile(dir / "small", std::string(100, 'x'));
  WriteFile(dir / "big", std::string(101, 'x'));
  ExportOptions options;
  options.max_file_bytes = 100;
  const WalkResult result = Walk(dir, options);
  BOOST_TEST(Paths(result.files) == std::vector<std::string>{"small"},
             boost::test_tools::per_element());
  BOOST_TEST(ReasonFor(result, "big") == "too_large");
  BOOST_TEST(result.limit_hit);
}

BOOST_AUTO_TEST_CASE(files_past_max_files_are_skipped_in_sorted_order) {
  TempDir dir;
  for (const char* name : {"e", "c", "a", "d", "b"}) WriteFile(dir / name, "x");
  ExportOptions options;
  options.max_files = 3;
  const WalkResult result = Walk(dir, options);
  BOOST_TEST(Paths(result.files) == (std::vector<std::string>{"a", "b", "c"}),
             boost::test_tools::per_element());
  BOOST_TEST(ReasonFor(result, "d") == "too_many");
  BOOST_TEST(ReasonFor(result, "e") == "too_many");
  BOOST_TEST(result.limit_hit);
}

// What a run starts with (a session's files) is exported again only when the run touched it:
// rewritten with the same bytes, or changed with its mtime put back, it is exported; left
// alone, it is not; a new file is.
BOOST_AUTO_TEST_CASE(untouched_files_are_left_out_and_touched_ones_exported) {
  TempDir dir;
  WriteFile(dir / "in/same.csv", "a,b\n1,2\n");
  WriteFile(dir / "in/rewritten.csv", "a,b\n1,2\n");
  WriteFile(dir / "in/mtime_put_back.csv", "old");
  auto stamps = StampWorkspace(dir.path(), ExportOptions{});
  BOOST_TEST_REQUIRE(stamps.ok());
  BOOST_TEST_REQUIRE(stamps->size() == 3u);
  ExportOptions options;
  int64_t latest = 0;
  for (const auto& [path, stamp] : *stamps) {
    options.untouched[path] = stamp;
    latest = std::max(latest, stamp.ctime_ns);
  }
  WaitPastTimestamp(latest);
  WriteFile(dir / "in/rewritten.csv", "a,b\n1,2\n");
  WriteFile(dir / "in/mtime_put_back.csv", "new");
  const FileStamp old = options.untouched["in/mtime_put_back.csv"];
  const struct timespec times[2] = {{0, UTIME_OMIT},
                                    {static_cast<time_t>(old.mtime_ns / 1000000000),
                                     static_cast<long>(old.mtime_ns % 1000000000)}};
  BOOST_TEST_REQUIRE(::utimensat(AT_FDCWD, (dir / "in/mtime_put_back.csv").c_str(), times, 0) == 0);
  WriteFile(dir / "new.txt", "n");
  const WalkResult result = Walk(dir, options);
  BOOST_TEST(Paths(result.files) ==
                 (std::vector<std::string>{"in/mtime_put_back.csv", "in/rewritten.csv", "new.txt"}),
             boost::test_tools::per_element());
  BOOST_TEST(result.skipped.empty());  // left out silently, see export.cc
}

BOOST_AUTO_TEST_CASE(stamps_encode_and_decode) {
  const FileStamp stamp = {123456789, 42, 1700000000123456789, -5};
  BOOST_TEST(EncodeStamp(stamp) == "123456789 42 1700000000123456789 -5");
  auto back = DecodeStamp(EncodeStamp(stamp));
  BOOST_TEST_REQUIRE(back.has_value());
  BOOST_TEST((*back == stamp));
  for (const char* bad :
       {"", "1 2 3", "1 2 3 4 5", "1 2 3 x", "1  2 3 4", "-1 2 3 4", "1 2 3 4 "}) {
    BOOST_TEST(!DecodeStamp(bad).has_value(), bad);
  }
}

BOOST_AUTO_TEST_CASE(hostile_names_are_listed_byte_for_byte) {
  TempDir dir;
  const std::vector<std::string> names = {
      "new\nline", std::string(255, 'n'), "bad\xff\xfe utf8", "-rf", "--help",
      " space ",   "quote\"'`$(x)",       "back\\slash"};
  for (const std::string& name : names) WriteFile(dir / name, "x");
  const WalkResult result = Walk(dir);
  std::vector<std::string> expected = names;
  std::sort(expected.begin(), expected.end());
  BOOST_TEST(Paths(result.files) == expected, boost::test_tools::per_element());
}

// A file 1000 directories deep was skipped as "too_many"; it is "too_deep".
BOOST_AUTO_TEST_CASE(directory_past_depth_bound_is_skipped_as_too_deep) {
  TempDir dir;
  std::string rel;
  for (int i = 0; i < 70; ++i) rel += (rel.empty() ? "" : "/") + std::string("d");
  WriteFile(dir / (rel + "/deep.txt"), "x");
  WriteFile(dir / "top.txt", "x");
  const WalkResult result = Walk(dir);
  BOOST_TEST(Paths(result.files) == std::vector<std::string>{"top.txt"},
             boost::test_tools::per_element());
  // Depth 0 is the workspace; the 65th nested "d" is the first one not entered.
  std::string skipped;
  for (int i = 0; i < 65; ++i) skipped += (skipped.empty() ? "" : "/") + std::string("d");
  BOOST_TEST(ReasonFor(result, skipped) == "too_deep");
  BOOST_TEST(result.skipped.size() == 1u);
  BOOST_TEST(result.limit_hit);
}

// 4000 files with long paths made a 263 MB response. A path over
// max_path_bytes is "too_long"; so are the files past the listed-path byte budget.
BOOST_AUTO_TEST_CASE(long_paths_and_the_listed_byte_budget_give_too_long) {
  TempDir dir;
  const std::string segment(200, 'p');
  // 25 levels of 200-byte names: past PATH_MAX, so made one level at a time (mkdirat).
  int fd = open(dir.path().c_str(), O_RDONLY | O_DIRECTORY);
  for (int i = 0; i < 25; ++i) {
    BOOST_TEST_REQUIRE(mkdirat(fd, segment.c_str(), 0755) == 0);
    const int next = openat(fd, segment.c_str(), O_RDONLY | O_DIRECTORY);
    close(fd);
    fd = next;
  }
  close(openat(fd, "f", O_WRONLY | O_CREAT, 0644));
  close(fd);
  for (int i = 0; i < 10; ++i) WriteFile(dir / ("short/" + segment + std::to_string(i)), "x");
  ExportOptions options;
  options.max_listed_path_bytes = 3 * (6 + 201);  // three of the short/ files
  const WalkResult result = Walk(dir, options);
  BOOST_TEST(result.files.size() == 3u);
  // The first directory over 4096 bytes (21 names of 200 bytes) is one entry.
  std::string first_too_long = segment;
  for (int i = 1; i < 21; ++i) first_too_long += "/" + segment;
  BOOST_TEST(ReasonFor(result, first_too_long) == "too_long");
  int too_long = 0;
  for (const SkippedFile& s : result.skipped) too_long += s.reason == "too_long";
  BOOST_TEST(too_long == 8);  // 7 short/ files past the budget + 1 directory
  BOOST_TEST(result.limit_hit);
  // Too long for std::filesystem::remove_all in ~TempDir: removed fd-relative.
  const int root = open(dir.path().c_str(), O_RDONLY | O_DIRECTORY);
  BOOST_TEST(RemoveTreeAt(root, segment));
  close(root);
  BOOST_TEST(WalkLimits{}.max_skipped_listed == 1000u);
}

BOOST_AUTO_TEST_CASE(skipped_list_is_bounded_and_the_rest_counted) {
  TempDir dir;
  for (int i = 0; i < 30; ++i) WriteFile(dir / ("f" + std::to_string(i)), "");
  ExportOptions options;
  options.max_files = 5;
  WalkLimits limits;
  limits.max_skipped_listed = 10;
  auto result = WalkWorkspaceWithLimits(dir.path(), options, limits);
  BOOST_TEST_REQUIRE(result.ok());
  BOOST_TEST(result->files.size() == 5u);
  BOOST_TEST(result->skipped.size() == 10u);
  BOOST_TEST(result->skipped_unlisted == 15u);
}

BOOST_AUTO_TEST_CASE(found_files_report_bytes_on_disk_not_size) {
  TempDir dir;
  const std::string path = dir / "sparse.bin";
  WriteFile(path, "");
  BOOST_TEST_REQUIRE(truncate(path.c_str(), 10 << 20) == 0);
  const WalkResult result = Walk(dir);
  BOOST_TEST_REQUIRE(result.files.size() == 1u);
  BOOST_TEST(result.files[0].size == uint64_t{10} << 20);
  BOOST_TEST(result.files[0].bytes_on_disk == 0u);
}

BOOST_AUTO_TEST_CASE(walk_stops_reading_past_entry_bound) {
  TempDir dir;
  for (int i = 0; i < 60; ++i) WriteFile(dir / ("many/" + std::to_string(i)), "");
  WriteFile(dir / "top.txt", "");
  ExportOptions options;
  options.max_files = 1000;
  WalkLimits limits;
  limits.max_entries = 50;  // the default (100000) would take seconds to build here
  auto result = WalkWorkspaceWithLimits(dir.path(), options, limits);
  BOOST_TEST_REQUIRE(result.ok());
  // "many" and "top.txt" are 2 entries; 48 names of many/ fit, the rest is never read.
  BOOST_TEST(result->files.size() == 49u);
  BOOST_TEST(ReasonFor(*result, "many") == "too_many");
  BOOST_TEST(result->skipped.size() == 1u);
  BOOST_TEST(result->limit_hit);
}

BOOST_AUTO_TEST_CASE(entry_bound_covers_the_whole_tree_not_each_directory) {
  TempDir dir;
  for (int d = 0; d < 10; ++d) {
    for (int i = 0; i < 10; ++i)
      WriteFile(dir / ("d" + std::to_string(d) + "/" + std::to_string(i)), "");
  }
  WalkLimits limits;
  limits.max_entries = 35;
  auto result = WalkWorkspaceWithLimits(dir.path(), {}, limits);
  BOOST_TEST_REQUIRE(result.ok());
  // 10 directory entries + 25 files are read: d2 is cut short, d3..d9 are not read at all.
  BOOST_TEST(result->files.size() == 25u);
  BOOST_TEST(ReasonFor(*result, "d2") == "too_many");
  BOOST_TEST(ReasonFor(*result, "d9") == "too_many");
  BOOST_TEST(result->limit_hit);
}

BOOST_AUTO_TEST_CASE(default_limits_are_the_documented_ones) {
  BOOST_TEST(WalkLimits{}.max_depth == 64);
  BOOST_TEST(WalkLimits{}.max_entries == 100000u);
}

BOOST_AUTO_TEST_CASE(missing_workspace_is_a_storage_error) {
  auto result = WalkWorkspace("/nonexistent/sandrun/workspace", {});
  BOOST_TEST_REQUIRE(!result.ok());
  BOOST_TEST((result.error().kind == ErrorKind::kSystem));
  BOOST_TEST(result.error().message.find("/nonexistent/sandrun/workspace") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::storage
