#define BOOST_TEST_MODULE sys_tree_walk
#include "sys/tree_walk.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "sys/syscalls.h"

using sandrun::sys::TreeEntry;
using sandrun::sys::TreeLimits;
using sandrun::sys::TreeReport;
using sandrun::sys::TreeStep;
using sandrun::sys::TreeStop;
using sandrun::sys::TreeVisitor;
using sandrun::sys::WalkTreeAt;

namespace sandrun::sys {
std::ostream& operator<<(std::ostream& out, TreeStop stop) {
  return out << "TreeStop(" << TreeStopName(stop) << ")";
}
}  // namespace sandrun::sys

namespace {

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/sandrun-walk-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf " + path).c_str()); }
  void File(const std::string& rel, size_t size = 0) const {
    BOOST_REQUIRE(sandrun::sys::WriteFile(path + "/" + rel, std::string(size, 'x')).ok());
  }
  void Dir(const std::string& rel) const {
    BOOST_REQUIRE(sandrun::sys::MakeDirs(path + "/" + rel).ok());
  }
  std::string path;
};

// Records the paths it was shown, in order; "<" marks Leave.
struct Recorder : TreeVisitor {
  TreeStep Enter(const TreeEntry& entry) override {
    seen.push_back(entry.path);
    return entry.path == skip   ? TreeStep::kSkip
           : entry.path == stop ? TreeStep::kStop
                                : TreeStep::kDescend;
  }
  TreeStep Leave(const TreeEntry& entry, int) override {
    seen.push_back("<" + entry.path);
    return TreeStep::kDescend;
  }
  std::vector<std::string> seen;
  std::string skip, stop;
};

TreeReport Walk(const TempDir& dir, const TreeLimits& limits, Recorder& visitor) {
  return WalkTreeAt(AT_FDCWD, dir.path, limits, visitor);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(TreeWalk)

BOOST_AUTO_TEST_CASE(visits_every_entry_in_sorted_order_pre_and_post) {
  TempDir dir;
  dir.Dir("b/c");
  dir.File("a", 10);
  dir.File("b/c/d", 5000);
  Recorder visitor;
  const TreeReport report = Walk(dir, TreeLimits{}, visitor);
  BOOST_TEST(report.complete());
  BOOST_TEST(report.Describe(TreeLimits{}) == "");
  const std::vector<std::string> want = {"a", "b", "b/c", "b/c/d", "<b/c", "<b"};
  BOOST_TEST(visitor.seen == want, boost::test_tools::per_element());
  BOOST_TEST(report.entries == 4u);
  BOOST_TEST(report.files == 2u);
  BOOST_TEST(report.dirs == 2u);
  BOOST_TEST(report.bytes == 5010u);
}

BOOST_AUTO_TEST_CASE(never_follows_a_symlink) {
  TempDir dir, outside;
  outside.File("secret");
  dir.Dir("d");
  BOOST_REQUIRE(::symlink(outside.path.c_str(), (dir.path + "/d/link").c_str()) == 0);
  Recorder visitor;
  const TreeReport report = Walk(dir, TreeLimits{}, visitor);
  BOOST_TEST(report.complete());
  const std::vector<std::string> want = {"d", "d/link", "<d"};
  BOOST_TEST(visitor.seen == want, boost::test_tools::per_element());
  BOOST_TEST(report.files == 0u);
}

BOOST_AUTO_TEST_CASE(stops_and_reports_past_max_depth) {
  TempDir dir;
  dir.Dir("1/2/3/4");
  Recorder visitor;
  TreeLimits limits;
  limits.max_depth = 2;
  const TreeReport report = Walk(dir, limits, visitor);
  BOOST_TEST(!report.complete());
  BOOST_TEST(report.stop == TreeStop::kDepth);
  BOOST_TEST(report.stopped_at == "1/2/3");
  BOOST_TEST(report.Describe(limits) == "stopped at 1/2/3: deeper than 2 directories");
  // Seen, not entered; no Leave after a stop.
  const std::vector<std::string> want = {"1", "1/2", "1/2/3"};
  BOOST_TEST(visitor.seen == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_tree_exactly_at_the_limits_is_complete) {
  TempDir dir;
  dir.Dir("1/2");
  dir.File("1/2/f", 1);
  Recorder visitor;
  TreeLimits limits;
  limits.max_depth = 2;
  limits.max_entries = 3;
  const TreeReport report = Walk(dir, limits, visitor);
  BOOST_TEST(report.complete(), report.Describe(limits));
  BOOST_TEST(report.entries == 3u);
}

BOOST_AUTO_TEST_CASE(stops_and_reports_past_max_entries_without_listing_the_rest) {
  TempDir dir;
  for (int i = 0; i < 10; ++i) dir.File("f" + std::to_string(i));
  Recorder visitor;
  TreeLimits limits;
  limits.max_entries = 4;
  const TreeReport report = Walk(dir, limits, visitor);
  BOOST_TEST(report.stop == TreeStop::kEntries);
  BOOST_TEST(report.stopped_at == ".");  // the directory that held too many names
  BOOST_TEST(visitor.seen.empty());      // not a readdir-order sample of them
  BOOST_TEST(report.Describe(limits) == "stopped at .: more than 4 files and directories");
}

BOOST_AUTO_TEST_CASE(entries_count_across_directories) {
  TempDir dir;
  dir.Dir("a");
  dir.Dir("b");
  dir.File("a/x");
  dir.File("b/y");
  Recorder visitor;
  TreeLimits limits;
  limits.max_entries = 3;
  const TreeReport report = Walk(dir, limits, visitor);
  BOOST_TEST(report.stop == TreeStop::kEntries);
  BOOST_TEST(report.stopped_at == "b");
  BOOST_TEST(report.entries == 3u);
}

BOOST_AUTO_TEST_CASE(stops_and_reports_past_max_bytes) {
  TempDir dir;
  dir.File("a", 8192);
  dir.File("b", 8192);
  Recorder visitor;
  TreeLimits limits;
  limits.max_bytes = 12288;  // room for one file of two or three blocks, not both
  const TreeReport report = Walk(dir, limits, visitor);
  BOOST_TEST(report.stop == TreeStop::kBytes);
  BOOST_TEST(report.stopped_at == "b");
  const std::vector<std::string> want = {"a"};
  BOOST_TEST(visitor.seen == want, boost::test_tools::per_element());
  BOOST_TEST(report.bytes_on_disk <= limits.max_bytes);
}

BOOST_AUTO_TEST_CASE(the_visitor_may_skip_a_directory_or_stop_the_walk) {
  TempDir dir;
  dir.Dir("a");
  dir.Dir("b");
  dir.File("a/x");
  dir.File("b/y");
  dir.File("c");
  Recorder visitor;
  visitor.skip = "a";
  visitor.stop = "b/y";
  const TreeReport report = Walk(dir, TreeLimits{}, visitor);
  BOOST_TEST(report.stop == TreeStop::kVisitor);
  BOOST_TEST(report.stopped_at == "b/y");
  const std::vector<std::string> want = {"a", "b", "b/y"};
  BOOST_TEST(visitor.seen == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_missing_root_is_reported) {
  Recorder visitor;
  const TreeReport report =
      WalkTreeAt(AT_FDCWD, "/nonexistent/sandrun-walk", TreeLimits{}, visitor);
  BOOST_TEST(report.stop == TreeStop::kRootOpen);
  BOOST_TEST(report.err == ENOENT);
}

BOOST_AUTO_TEST_SUITE_END()
