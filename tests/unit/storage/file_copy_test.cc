// Unit tests of storage/file_copy.h: the one copy routine of exports and sessions.
#define BOOST_TEST_MODULE storage_file_copy
#include "storage/file_copy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <string>

#include "storage/digest.h"
#include "sys/unique_fd.h"
#include "test_util.h"

namespace sandrun::storage {
namespace {

using testing::ReadFile;
using testing::TempDir;

uint64_t OnDisk(const std::string& path) {
  struct stat st;
  BOOST_TEST_REQUIRE(stat(path.c_str(), &st) == 0);
  return BytesOnDisk(st);
}

// A `size`-byte file with `data` written at each of `offsets`, holes elsewhere.
void MakeSparse(const std::string& path, uint64_t size, const std::string& data,
                std::initializer_list<off_t> offsets) {
  sys::UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644));
  BOOST_TEST_REQUIRE(fd.valid());
  for (off_t offset : offsets) {
    BOOST_TEST_REQUIRE(pwrite(fd.get(), data.data(), data.size(), offset) ==
                       static_cast<ssize_t>(data.size()));
  }
  BOOST_TEST_REQUIRE(ftruncate(fd.get(), static_cast<off_t>(size)) == 0);
}

Result<CopiedFile> Copy(const std::string& from, const std::string& to, uint64_t max_size,
                        const CopyObserver& observe = nullptr) {
  sys::UniqueFd in(open(from.c_str(), O_RDONLY));
  sys::UniqueFd out(open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644));
  BOOST_TEST_REQUIRE((in.valid() && out.valid()));
  return CopyFileKeepingHoles(in.get(), out.get(), max_size, to, observe);
}

BOOST_AUTO_TEST_SUITE(FileCopy)

// Sparse files were copied dense (10 MiB of holes became 10 MiB).
BOOST_AUTO_TEST_CASE(copy_keeps_holes_and_bytes) {
  TempDir dir;
  const std::string data(8192, 'd');
  MakeSparse(dir / "src", 10 << 20, data, {0, 8 << 20});
  Sha256 sha;
  auto copied = Copy(dir / "src", dir / "dst", UINT64_MAX,
                     [&](const char* p, size_t n) { sha.Update(p, n); });
  BOOST_TEST_REQUIRE(copied.ok(), (copied.ok() ? "" : copied.error().message));
  const std::string src = ReadFile(dir / "src");
  BOOST_TEST_REQUIRE(src.size() == size_t{10} << 20);
  BOOST_TEST((ReadFile(dir / "dst") == src));
  BOOST_TEST(copied->size == uint64_t{10} << 20);
  BOOST_TEST(copied->bytes_on_disk == OnDisk(dir / "dst"));
  // The source uses its two data blocks (plus at most file system overhead); so does the copy.
  BOOST_TEST(OnDisk(dir / "dst") <= OnDisk(dir / "src"));
  BOOST_TEST(OnDisk(dir / "dst") < uint64_t{1} << 20);
  Sha256 expected;
  expected.Update(src.data(), src.size());
  BOOST_TEST(sha.FinalHex() == expected.FinalHex());  // holes observed as zeros
}

BOOST_AUTO_TEST_CASE(written_zeros_become_holes) {
  TempDir dir;
  testing::WriteFile(dir / "src", std::string(1 << 20, '\0'));
  BOOST_TEST(OnDisk(dir / "src") >= uint64_t{1} << 20);
  auto copied = Copy(dir / "src", dir / "dst", UINT64_MAX);
  BOOST_TEST_REQUIRE(copied.ok());
  BOOST_TEST(copied->size == uint64_t{1} << 20);
  BOOST_TEST(OnDisk(dir / "dst") == 0u);
  BOOST_TEST((ReadFile(dir / "dst") == std::string(1 << 20, '\0')));
}

BOOST_AUTO_TEST_CASE(file_over_max_size_is_not_copied) {
  TempDir dir;
  testing::WriteFile(dir / "src", "0123456789");
  auto copied = Copy(dir / "src", dir / "dst", 9);
  BOOST_TEST_REQUIRE(copied.ok());
  BOOST_TEST(copied->too_large);
  BOOST_TEST(ReadFile(dir / "dst").empty());
  auto exact = Copy(dir / "src", dir / "dst2", 10);
  BOOST_TEST_REQUIRE(exact.ok());
  BOOST_TEST(!exact->too_large);
  BOOST_TEST(ReadFile(dir / "dst2") == "0123456789");
}

BOOST_AUTO_TEST_CASE(empty_file_copies_empty) {
  TempDir dir;
  testing::WriteFile(dir / "src", "");
  auto copied = Copy(dir / "src", dir / "dst", UINT64_MAX);
  BOOST_TEST_REQUIRE(copied.ok());
  BOOST_TEST(copied->size == 0u);
  BOOST_TEST(testing::Exists(dir / "dst"));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace sandrun::storage
