#define BOOST_TEST_MODULE util_relative_path
#include "util/relative_path.h"

#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

using sandrun::util::RelativePathError;
using sandrun::util::SplitRelativePath;

BOOST_AUTO_TEST_SUITE(RelativePath)

BOOST_AUTO_TEST_CASE(accepts_plain_relative_paths) {
  const std::vector<std::string> oks = {"a",
                                        "a/b.txt",
                                        ".hidden/x",
                                        "a b/c\nd",
                                        "x..y/..z",
                                        "...",
                                        std::string(255, 'n') + "/" + std::string(255, 'm')};
  for (const std::string& ok : oks) {
    BOOST_TEST(RelativePathError(ok) == "", ok);
  }
}

BOOST_AUTO_TEST_CASE(says_which_rule_a_path_breaks) {
  BOOST_TEST(RelativePathError("") == "is empty");
  BOOST_TEST(RelativePathError(std::string(4097, 'a')) == "is longer than 4096 bytes");
  BOOST_TEST(RelativePathError("/etc/passwd") ==
             "must be relative to the workspace (no leading '/')");
  BOOST_TEST(RelativePathError("a//b") == "has an empty segment ('//' or a trailing '/')");
  BOOST_TEST(RelativePathError("a/") == "has an empty segment ('//' or a trailing '/')");
  BOOST_TEST(RelativePathError("a/../../b") == "must not contain '.' or '..' segments");
  BOOST_TEST(RelativePathError("./x") == "must not contain '.' or '..' segments");
  BOOST_TEST(RelativePathError("..") == "must not contain '.' or '..' segments");
  BOOST_TEST(RelativePathError("a/" + std::string(256, 'n')) == "has a name longer than 255 bytes");
  BOOST_TEST(RelativePathError(std::string("a\0b", 3)) == "contains a NUL byte");
}

BOOST_AUTO_TEST_CASE(the_longest_path_allowed_is_4096_bytes) {
  std::string path;
  while (path.size() + 101 <= 4096) path += std::string(100, 'a') + "/";
  path += std::string(4096 - path.size(), 'b');
  BOOST_TEST(path.size() == 4096u);
  BOOST_TEST(RelativePathError(path) == "");
}

BOOST_AUTO_TEST_CASE(splits_only_what_it_accepts) {
  std::vector<std::string> parts;
  BOOST_TEST(SplitRelativePath("a/b/c.txt", &parts));
  const std::vector<std::string> want = {"a", "b", "c.txt"};
  BOOST_TEST(parts == want, boost::test_tools::per_element());
  for (const std::string bad : {"", "/a", "a//b", "a/./b", "../a", "a/"}) {
    BOOST_TEST(!SplitRelativePath(bad, &parts), bad);
  }
}

BOOST_AUTO_TEST_SUITE_END()
