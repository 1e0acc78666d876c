// Tests for storage/mime.cc: how libmagic's answer and the file name are combined.
#define BOOST_TEST_MODULE storage_mime
#include "storage/mime.h"

#include <boost/test/unit_test.hpp>
#include <string>

#include "test_util.h"

namespace sandrun::storage {

BOOST_AUTO_TEST_SUITE(Mime)

// Without an answer from libmagic the name decides: its extension, whatever its case.
BOOST_AUTO_TEST_CASE(name_lookup_ignores_case_and_dotfiles) {
  BOOST_TEST(CombineMime("", "Report.CSV") == "text/csv");
  BOOST_TEST(CombineMime("", "dir.d/plot.Png") == "image/png");
  BOOST_TEST(CombineMime("", ".json") == "application/octet-stream");  // a dotfile
  BOOST_TEST(CombineMime("", "README") == "application/octet-stream");
  BOOST_TEST(CombineMime("", "archive.tar.gz") == "application/gzip");
}

BOOST_AUTO_TEST_CASE(libmagic_reads_content) {
  const std::string png = testing::TinyPng();
  BOOST_TEST(MimeForContent(png.data(), png.size()) == "image/png");
  const std::string zip = testing::EmptyZip();
  BOOST_TEST(MimeForContent(zip.data(), zip.size()) == "application/zip");
}

BOOST_AUTO_TEST_CASE(name_refines_generic_text) {
  BOOST_TEST(CombineMime("text/plain", "t.csv") == "text/csv");
  BOOST_TEST(CombineMime("text/plain", "notes.md") == "text/markdown");
  BOOST_TEST(CombineMime("text/x-script.python", "main.py") == "text/x-python");
  BOOST_TEST(CombineMime("application/json", "d.json") == "application/json");
  BOOST_TEST(CombineMime("text/html", "page.html") == "text/html");
  BOOST_TEST(CombineMime("inode/x-empty", "empty.csv") == "text/csv");
}

BOOST_AUTO_TEST_CASE(name_refines_zip_containers) {
  BOOST_TEST(CombineMime("application/zip", "b.xlsx") ==
             "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet");
  BOOST_TEST(CombineMime("application/zip", "d.docx") ==
             "application/vnd.openxmlformats-officedocument.wordprocessingml.document");
  BOOST_TEST(CombineMime("application/zip", "x.zip") == "application/zip");
}

BOOST_AUTO_TEST_CASE(content_wins_when_it_is_specific) {
  BOOST_TEST(CombineMime("text/plain", "fake.png") == "text/plain");
  BOOST_TEST(CombineMime("image/png", "plot.csv") == "image/png");
  BOOST_TEST(CombineMime("application/pdf", "b.xlsx") == "application/pdf");
  BOOST_TEST(CombineMime("image/png", "noext") == "image/png");
}

BOOST_AUTO_TEST_CASE(unknown_everything_is_octet_stream) {
  BOOST_TEST(CombineMime("", "blob") == "application/octet-stream");
  BOOST_TEST(CombineMime("application/octet-stream", "blob") == "application/octet-stream");
  BOOST_TEST(CombineMime("application/octet-stream", "data.parquet") ==
             "application/vnd.apache.parquet");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::storage
