// Files a run writes: exported with metadata and a signed link, downloaded through nginx with
// the headers of DESIGN.md §2; symlinks are never followed (DESIGN.md §4).
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <string>

#include "helpers.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

// The entry of `files` (or `files_skipped`) whose path is `path`; nullptr if none.
const rapidjson::Value* FindByPath(const rapidjson::Value& doc, const char* list,
                                   const std::string& path) {
  if (!doc.HasMember(list) || !doc[list].IsArray()) {
    BOOST_ERROR("answer has no array '" << list << "'");
    return nullptr;
  }
  for (const auto& entry : doc[list].GetArray()) {
    if (entry.IsObject() && entry.HasMember("path") && entry["path"].IsString() &&
        path == entry["path"].GetString()) {
      return &entry;
    }
  }
  return nullptr;
}

// Checks the headers every download carries.
void CheckDownloadHeaders(const HttpResponse& response, const std::string& disposition) {
  BOOST_TEST(response.Header("X-Content-Type-Options") == "nosniff");
  BOOST_TEST(response.Header("Content-Security-Policy").find("sandbox") != std::string::npos);
  BOOST_TEST(response.Header("Content-Disposition").rfind(disposition, 0) == 0,
             "Content-Disposition '" << response.Header("Content-Disposition")
                                     << "' should start with " << disposition);
}

// A 1x1 RGB PNG written with the standard library only.
const char* kWritePng = R"py(import struct, zlib
def chunk(kind, data):
    body = kind + data
    return struct.pack('>I', len(data)) + body + struct.pack('>I', zlib.crc32(body) & 0xffffffff)
png = (b'\x89PNG\r\n\x1a\n'
       + chunk(b'IHDR', struct.pack('>IIBBBBB', 1, 1, 8, 2, 0, 0, 0))
       + chunk(b'IDAT', zlib.compress(b'\x00\xff\x00\x00'))
       + chunk(b'IEND', b''))
with open('dot.png', 'wb') as f:
    f.write(png)
)py";

}  // namespace

BOOST_AUTO_TEST_SUITE(GeneratedFiles)

BOOST_AUTO_TEST_CASE(csv_is_exported_and_downloads_as_attachment) {
  auto doc = PostRun(RunRequest("python",
                                "import csv\n"
                                "with open('/mnt/data/t.csv', 'w', newline='') as f:\n"
                                "    csv.writer(f).writerow([1, 2])\n"));
  BOOST_TEST(Str(doc, "status") == "ok");
  BOOST_REQUIRE((doc.HasMember("files") && doc["files"].IsArray() && doc["files"].Size() == 1));
  const rapidjson::Value& file = doc["files"][0];
  BOOST_TEST(Str(file, "path") == "t.csv");
  BOOST_TEST(Str(file, "name") == "t.csv");
  BOOST_TEST(Int(file, "size") == 5);
  BOOST_TEST(Str(file, "sha256") == Sha256Hex("1,2\r\n"));
  BOOST_TEST(Str(file, "mime").rfind("text/", 0) == 0);
  BOOST_TEST(file.HasMember("expires_at"));
  const std::string url = Str(file, "url");
  BOOST_TEST(url.rfind(Stack::Get().base_url() + "/files/", 0) == 0, "url " << url);

  HttpResponse download = GetUrl(url);
  BOOST_TEST(download.status == 200);
  BOOST_TEST(download.body == "1,2\r\n");  // the csv module ends rows with \r\n
  BOOST_TEST(Sha256Hex(download.body) == Str(file, "sha256"));
  BOOST_TEST(download.Header("Content-Type").rfind("text/csv", 0) == 0);
  CheckDownloadHeaders(download, "attachment");
}

BOOST_AUTO_TEST_CASE(png_is_shown_inline) {
  auto doc = PostRun(RunRequest("python", kWritePng));
  BOOST_TEST(Str(doc, "status") == "ok");
  const rapidjson::Value* file = FindByPath(doc, "files", "dot.png");
  BOOST_REQUIRE_MESSAGE(file != nullptr, "dot.png not exported");
  BOOST_TEST(Str(*file, "mime") == "image/png");

  HttpResponse download = GetUrl(Str(*file, "url"));
  BOOST_TEST(download.status == 200);
  BOOST_TEST(download.body.rfind("\x89PNG\r\n\x1a\n", 0) == 0);
  BOOST_TEST(static_cast<int64_t>(download.body.size()) == Int(*file, "size"));
  BOOST_TEST(download.Header("Content-Type") == "image/png");
  CheckDownloadHeaders(download, "inline");
}

BOOST_AUTO_TEST_CASE(html_and_svg_are_never_served_as_documents) {
  auto doc = PostRun(RunRequest("python",
                                "open('page.html', 'w').write('<script>alert(1)</script>')\n"
                                "open('pic.svg', 'w').write('<svg xmlns=\"http://www.w3.org/2000/"
                                "svg\"><script>alert(1)</script></svg>')\n"));
  BOOST_TEST(Str(doc, "status") == "ok");
  for (const char* name : {"page.html", "pic.svg"}) {
    BOOST_TEST_CONTEXT(name) {
      const rapidjson::Value* file = FindByPath(doc, "files", name);
      BOOST_REQUIRE_MESSAGE(file != nullptr, name << " not exported");
      HttpResponse download = GetUrl(Str(*file, "url"));
      BOOST_TEST(download.status == 200);
      BOOST_TEST(download.Header("Content-Type") == "application/octet-stream");
      CheckDownloadHeaders(download, "attachment");
    }
  }
}

BOOST_AUTO_TEST_CASE(symlink_to_host_file_is_skipped) {
  auto doc = PostRun(RunRequest("python",
                                "import os\n"
                                "os.symlink('/etc/passwd', '/home/user/pw')\n"
                                "with open('/home/user/real.txt', 'w') as f:\n"
                                "    f.write('genuine output\\n')\n"));
  BOOST_TEST(Str(doc, "status") == "ok");
  BOOST_TEST(FindByPath(doc, "files", "real.txt") != nullptr);
  BOOST_TEST(FindByPath(doc, "files", "pw") == nullptr, "the symlink was exported");
  const rapidjson::Value* skipped = FindByPath(doc, "files_skipped", "pw");
  BOOST_REQUIRE_MESSAGE(skipped != nullptr, "pw not listed in files_skipped");
  BOOST_TEST(Str(*skipped, "reason") == "symlink");

  // No artifact on disk is a link or holds the host's /etc/passwd.
  const std::string passwd = ReadFile("/etc/passwd");
  const std::string first_line = passwd.substr(0, passwd.find('\n'));
  BOOST_REQUIRE(!first_line.empty());
  namespace fs = std::filesystem;
  for (const auto& entry : fs::recursive_directory_iterator(Stack::Get().artifacts_dir())) {
    BOOST_TEST(!entry.is_symlink(), entry.path() << " is a symlink");
    if (entry.is_regular_file() && !entry.is_symlink()) {
      BOOST_TEST(ReadFile(entry.path()).find(first_line) == std::string::npos,
                 entry.path() << " contains /etc/passwd");
    }
  }
}

// file_size_mb is the largest whole file: a file of exactly that size is exported, a larger
// one is cut by RLIMIT_FSIZE above the limit and skipped as too_large (never published cut).
BOOST_AUTO_TEST_CASE(a_file_of_exactly_file_size_mb_is_exported_and_a_larger_one_is_not) {
  for (const char* language : {"python", "bash"}) {
    BOOST_TEST_CONTEXT(language) {
      const std::string code =
          std::string(language) == "python"
              ? "open('exact.bin', 'wb').write(b'x' * (1 << 20))\n"
                "try:\n    open('over.bin', 'wb').write(b'y' * (2 << 20))\n"
                "except OSError as e:\n    print('refused', e.errno)\n"
              : "head -c 1048576 /dev/zero > exact.bin\n"
                "head -c 2097152 /dev/zero > over.bin 2>/dev/null || echo refused\n";
      auto doc = PostRun(RunRequest(language, code, {{"file_size_mb", 1}}));
      BOOST_TEST(Str(doc, "status") == "ok", Str(doc, "stderr"));
      BOOST_TEST(Str(doc, "stdout").rfind("refused", 0) == 0, Str(doc, "stdout"));
      const rapidjson::Value* exact = FindByPath(doc, "files", "exact.bin");
      BOOST_REQUIRE_MESSAGE(exact != nullptr, "exact.bin not exported: " << Str(doc, "stderr"));
      BOOST_TEST(Int(*exact, "size") == 1 << 20);
      BOOST_TEST(GetUrl(Str(*exact, "url")).body.size() == size_t{1} << 20);
      BOOST_TEST(FindByPath(doc, "files", "over.bin") == nullptr, "a cut file was published");
      const rapidjson::Value* over = FindByPath(doc, "files_skipped", "over.bin");
      BOOST_REQUIRE_MESSAGE(over != nullptr, "over.bin not in files_skipped");
      BOOST_TEST(Str(*over, "reason") == "too_large");
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
