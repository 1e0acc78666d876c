// Which distributions of one --target directory overwrote each other's files
// (storage/dist_records.h), from RECORD files written here as pip writes them.
#define BOOST_TEST_MODULE dist_records
#include "storage/dist_records.h"

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <string>

#include "test_util.h"

namespace fs = std::filesystem;
using sandrun::storage::FindOverwrites;
using sandrun::storage::testing::TempDir;
using sandrun::storage::testing::WriteFile;

namespace {

// sha256 of "VALUE = 1\n" as RECORD writes it, and of another content.
constexpr char kHashOne[] = "sha256=4T34xEr13qHkEkA5ELmcxaSPLMv2imazN01quc75_GU";
constexpr char kHashOther[] = "sha256=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

// NAME-1.0.dist-info with METADATA and a RECORD of `rows` (and itself).
void Dist(const TempDir& site, const std::string& name, const std::string& rows) {
  const std::string info = name + "-1.0.dist-info";
  WriteFile(site / info + "/METADATA",
            "Metadata-Version: 2.1\nName: " + name + "\nVersion: 1.0\n\nlong text\n");
  WriteFile(site / info + "/RECORD", rows + info + "/METADATA,,\n" + info + "/RECORD,,\n");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(DistRecords)

BOOST_AUTO_TEST_CASE(distributions_with_their_own_files_pass) {
  TempDir site;
  WriteFile(site / "a/__init__.py", "x");
  Dist(site, "a",
       std::string("a/__init__.py,") + kHashOther +
           ",1\na/__pycache__/__init__.cpython-311.pyc,,\n");
  Dist(site, "b", "b/__init__.py,,\n\"b/odd, name.py\",,\n");
  BOOST_TEST(FindOverwrites(site.path()) == "");
}

BOOST_AUTO_TEST_CASE(a_module_shipped_by_two_distributions_is_named_with_both) {
  TempDir site;
  WriteFile(site / "victim/__init__.py", "VALUE = 1\n");
  Dist(site, "victim",
       std::string("victim/__init__.py,") + kHashOne +
           ",10\nvictim/__pycache__/__init__.cpython-311.pyc,,\n");
  Dist(site, "evil",
       std::string("victim/__init__.py,") + kHashOther +
           ",10\nvictim/__pycache__/__init__.cpython-311.pyc,,\n");
  const std::string why = FindOverwrites(site.path());
  BOOST_TEST(why.find("victim 1.0") != std::string::npos, why);
  BOOST_TEST(why.find("evil 1.0") != std::string::npos, why);
  BOOST_TEST(why.find("victim/__init__.py") != std::string::npos, why);
  BOOST_TEST(why.find("and 1 more file") != std::string::npos, why);  // its .pyc
}

BOOST_AUTO_TEST_CASE(a_claimed_hash_must_match_the_file_on_disk) {
  TempDir site;
  // Both RECORDs claim the victim's hash; the file on disk is another: an overwrite.
  WriteFile(site / "victim/__init__.py", "VALUE = 2\n");
  Dist(site, "victim", std::string("victim/__init__.py,") + kHashOne + ",10\n");
  Dist(site, "evil", std::string("victim/__init__.py,") + kHashOne + ",10\n");
  BOOST_TEST(FindOverwrites(site.path()) != "");
  // The same content, as a namespace package's shared __init__.py: no overwrite, nor of its
  // compiled file.
  WriteFile(site / "victim/__init__.py", "VALUE = 1\n");
  TempDir shared;
  WriteFile(shared / "ns/__init__.py", "VALUE = 1\n");
  const std::string rows = std::string("ns/__init__.py,") + kHashOne +
                           ",10\nns/__pycache__/__init__.cpython-311.pyc,,\n";
  Dist(shared, "ns-a", rows);
  Dist(shared, "ns-b", rows);
  BOOST_TEST(FindOverwrites(shared.path()) == "");
  BOOST_TEST(FindOverwrites(site.path()) == "");
}

BOOST_AUTO_TEST_CASE(writing_into_another_distributions_metadata_is_an_overwrite) {
  TempDir site;
  Dist(site, "victim", "victim/__init__.py,,\n");
  Dist(site, "evil", "victim-1.0.dist-info/RECORD,,\n");
  const std::string why = FindOverwrites(site.path());
  BOOST_TEST(why.find("victim-1.0.dist-info/RECORD") != std::string::npos, why);
  BOOST_TEST(why.find("evil 1.0") != std::string::npos, why);
}

BOOST_AUTO_TEST_CASE(what_cannot_be_read_is_not_passed) {
  TempDir site;
  // pip --target records console scripts as ../../bin/NAME: one is no overwrite, two are.
  Dist(site, "a", "../../bin/tool,sha256=x,1\n");
  BOOST_TEST(FindOverwrites(site.path()) == "");
  Dist(site, "b", "../../bin/./tool,sha256=y,1\n");
  BOOST_TEST(FindOverwrites(site.path()).find("both install ../../bin/tool") != std::string::npos,
             FindOverwrites(site.path()));
  TempDir linked;
  fs::create_directories(linked / "b-1.0.dist-info");
  fs::create_symlink("/etc/hostname", linked / "b-1.0.dist-info/RECORD");
  BOOST_TEST(FindOverwrites(linked.path()).find("no RECORD") != std::string::npos);
  BOOST_TEST(FindOverwrites(site / "missing").find("cannot be checked") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
