// The artifact store in a shared deployment (DESIGN.md §2, §4), through the real nginx: bearer
// tokens, per-user quotas and eviction, isolation of users, the per-user rate limit, and the
// headers each kind of file is served with, hostile names included.
//
// The ArtifactStore suite's ctest entry (CMakeLists.txt) runs the stack with tokens required
// and a small quota: user_quota_files 4, user_quota_mb 1, bearer_tokens kAliceToken and
// kBobToken, both marked `front_end` (they name many users). ArtifactServing runs with the
// test defaults (anonymous use, default quota).
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <boost/test/unit_test.hpp>
#include <cctype>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "artifact_helpers.h"
#include "helpers.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

constexpr char kAliceToken[] = "alice-token-0123456789abcdef";
constexpr char kBobToken[] = "bob-token-0123456789abcdef";

Headers As(const char* token, const std::string& user = "") {
  Headers headers{{"Authorization", std::string("Bearer ") + token}};
  if (!user.empty()) headers.emplace("X-Sandrun-User", user);
  return headers;
}

// A program that writes `count` files named <prefix>-<i>.txt, each holding its own name.
std::string WriteFiles(const std::string& prefix, int count) {
  return "for i in range(" + std::to_string(count) +
         "):\n"
         "    name = '" +
         prefix +
         "-%d.txt' % i\n"
         "    open(name, 'w').write(name)\n";
}

// POST /run as `user` (body and header, so each user has a rate limit of their own) with
// Alice's token unless another is given; requires 200.
rapidjson::Document RunAs(const std::string& user, const std::string& code,
                          const char* token = kAliceToken) {
  return PostRunWith(PythonRequest(code, user), As(token, user));
}

std::vector<std::string> Urls(const rapidjson::Value& doc) {
  std::vector<std::string> urls;
  if (ListSize(doc, "files") <= 0) return urls;
  for (const auto& file : doc["files"].GetArray()) urls.push_back(Str(file, "url"));
  return urls;
}

int DownloadStatus(const std::string& url) { return GetUrl(url).status; }

// "/files/<user-dir>/<run-id>/..." -> "<user-dir>" and "<run-id>".
std::pair<std::string, std::string> UserDirAndRun(const std::string& url) {
  const std::string path = ParseLink(url).path;
  const size_t a = std::string("/files/").size();
  const size_t b = path.find('/', a);
  const size_t c = path.find('/', b + 1);
  return {path.substr(a, b - a), path.substr(b + 1, c - b - 1)};
}

// Regular files of one user on disk, without the store's own run records.
int FilesOnDisk(const std::string& user_dir) {
  namespace fs = std::filesystem;
  int count = 0;
  const fs::path root = fs::path(Stack::Get().artifacts_dir()) / user_dir;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().filename() == ".sandrun") it.disable_recursion_pending();
    if (it->is_regular_file()) ++count;
  }
  return count;
}

// RFC 3986 percent-encoding of one path segment, unreserved characters kept: written here
// independently of the daemon's, to check what nginx puts in Content-Disposition.
std::string EncodeSegment(const std::string& raw) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : raw) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(ArtifactStore)

// ---- Auth and rate limit (DESIGN.md §2) --------------------------------------------------

BOOST_AUTO_TEST_CASE(run_without_a_valid_token_is_401) {
  const std::string body = PythonRequest("print(1)", "nobody");
  for (const Headers& headers :
       {Headers{}, Headers{{"Authorization", "Bearer wrong-token"}},
        Headers{{"Authorization", std::string("Basic ") + kAliceToken}},
        Headers{{"Authorization", std::string("Bearer ") + kAliceToken + "x"}}}) {
    HttpResponse response = PostWith("/run", body, headers);
    BOOST_TEST(response.status == 401);
    BOOST_TEST(response.Header("WWW-Authenticate") == "Bearer");
    BOOST_TEST(ParseServiceError(response.body).code == "unauthorized");
  }
  BOOST_TEST(PostWith("/run", body, As(kAliceToken)).status == 200);
  BOOST_TEST(PostWith("/run", body, As(kBobToken)).status == 200);
}

BOOST_AUTO_TEST_CASE(rate_limit_answers_429_with_json_per_user) {
  // Bad JSON is refused at once by the daemon, right after its per-user limit (10 r/s, 20 more
  // at once), so only that limit is measured: 30 requests back to back are well past it, and
  // within nginx's per-token burst (40), which the flood would otherwise spend for the tests
  // after it. Bob's token: the quota tests below run on Alice's.
  int limited = 0;
  HttpResponse last_limited;
  for (int i = 0; i < 30; ++i) {
    HttpResponse response = PostWith("/run", "{", As(kBobToken, "flood"));
    BOOST_TEST((response.status == 400 || response.status == 429), "status " << response.status);
    if (response.status == 429) {
      ++limited;
      last_limited = response;
    }
  }
  BOOST_TEST(limited > 0);
  BOOST_REQUIRE(limited > 0);
  BOOST_TEST(last_limited.Header("Content-Type").rfind("application/json", 0) == 0);
  BOOST_TEST(last_limited.Header("Retry-After") == "1");
  BOOST_TEST(last_limited.Header("X-Content-Type-Options") == "nosniff");
  const ServiceError error = ParseServiceError(last_limited.body);
  BOOST_TEST(error.code == "rate_limited");
  BOOST_TEST_MESSAGE("429 headers: Content-Type="
                     << last_limited.Header("Content-Type") << " Retry-After="
                     << last_limited.Header("Retry-After") << " body=" << last_limited.body);
  // Another user of the same token is not held back by "flood".
  BOOST_TEST(PostWith("/run", "{", As(kBobToken, "calm")).status == 400);
}

// ---- Quotas and eviction (DESIGN.md §4) ----------------------------------------------------

BOOST_AUTO_TEST_CASE(evicts_oldest_run_first) {
  BOOST_REQUIRE(Stack::Get().ConfigInt("user_quota_files") == 4);
  std::vector<std::vector<std::string>> runs;
  for (const char* prefix : {"first", "second", "third"}) {
    auto doc = RunAs("evict", WriteFiles(prefix, 2));
    BOOST_TEST(Str(doc, "status") == "ok");
    runs.push_back(Urls(doc));
    BOOST_REQUIRE(runs.back().size() == 2u);
  }
  // 6 files against a 4-file quota: the first run went, whole; the two newer ones stay.
  for (const std::string& url : runs[0]) BOOST_TEST(DownloadStatus(url) == 404, url);
  for (size_t i = 1; i < runs.size(); ++i) {
    for (const std::string& url : runs[i]) BOOST_TEST(DownloadStatus(url) == 200, url);
  }
  const auto [user_dir, first_run] = UserDirAndRun(runs[0][0]);
  BOOST_TEST(
      !std::filesystem::exists(Stack::Get().artifacts_dir() + "/" + user_dir + "/" + first_run));
  BOOST_TEST(FilesOnDisk(user_dir) == 4);
}

BOOST_AUTO_TEST_CASE(run_over_the_file_quota_is_refused_with_file_limit) {
  auto small = RunAs("big", WriteFiles("small", 1));
  const std::vector<std::string> kept = Urls(small);
  BOOST_REQUIRE(kept.size() == 1u);
  auto doc = RunAs("big", WriteFiles("many", 5));
  BOOST_TEST(Str(doc, "status") == "file_limit");
  BOOST_TEST(ListSize(doc, "files") == 0);
  BOOST_TEST(ListSize(doc, "files_skipped") == 5);
  for (int i = 0; i < 5; ++i) {
    const auto* skipped =
        FindEntry(doc, "files_skipped", "path", "many-" + std::to_string(i) + ".txt");
    BOOST_REQUIRE(skipped != nullptr);
    BOOST_TEST(Str(*skipped, "reason") == "quota");
  }
  BOOST_TEST(Str(doc, "stderr").find("per-user quota of 4 files") != std::string::npos,
             Str(doc, "stderr"));
  // Nothing of it was published, and nothing was evicted for it.
  BOOST_TEST(DownloadStatus(kept[0]) == 200);
  BOOST_TEST(FilesOnDisk(UserDirAndRun(kept[0]).first) == 1);
}

BOOST_AUTO_TEST_CASE(run_over_the_byte_quota_is_refused_and_large_runs_evict_by_bytes) {
  BOOST_REQUIRE(Stack::Get().ConfigInt("user_quota_mb") == 1);
  auto a = RunAs("bytes", "open('a.bin', 'wb').write(b'a' * 600 * 1024)\n");
  auto b = RunAs("bytes", "open('b.bin', 'wb').write(b'b' * 600 * 1024)\n");
  BOOST_TEST(Str(b, "status") == "ok");
  // 1200 KiB against 1 MiB: a.bin went to make room for b.bin.
  BOOST_TEST(DownloadStatus(Urls(a).at(0)) == 404);
  HttpResponse download = GetUrl(Urls(b).at(0));
  BOOST_TEST(download.status == 200);
  BOOST_TEST(download.body.size() == 600u * 1024u);
  auto huge = RunAs("bytes", "open('c.bin', 'wb').write(b'c' * 1536 * 1024)\n");
  BOOST_TEST(Str(huge, "status") == "file_limit");
  BOOST_TEST(Str(huge, "stderr").find("1.5 MiB") != std::string::npos, Str(huge, "stderr"));
  BOOST_TEST(DownloadStatus(Urls(b).at(0)) == 200);
}

BOOST_AUTO_TEST_CASE(concurrent_runs_of_one_user_stay_within_the_quota) {
  constexpr int kRuns = 4;
  std::vector<std::string> bodies, answers(kRuns);
  std::vector<int> statuses(kRuns, 0);
  for (int i = 0; i < kRuns; ++i) {
    bodies.push_back(PythonRequest(WriteFiles("race" + std::to_string(i), 2), "race"));
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < kRuns; ++i) {
    // Boost.Test checks are not thread-safe: collect, check after the join.
    threads.emplace_back([&, i] {
      httplib::Client client("127.0.0.1", Stack::Get().port());
      client.set_read_timeout(120, 0);
      const Headers headers = As(kAliceToken, "race");
      auto result = client.Post("/run", httplib::Headers(headers.begin(), headers.end()), bodies[i],
                                "application/json");
      if (result) {
        statuses[i] = result->status;
        answers[i] = result->body;
      }
    });
  }
  for (auto& t : threads) t.join();
  std::set<std::string> user_dirs;
  int live_runs = 0;
  for (int i = 0; i < kRuns; ++i) {
    BOOST_TEST(statuses[i] == 200, answers[i]);
    if (statuses[i] != 200) continue;
    auto doc = ParseJson(answers[i]);
    BOOST_TEST(Str(doc, "status") == "ok");
    const auto urls = Urls(doc);
    BOOST_REQUIRE(urls.size() == 2u);
    user_dirs.insert(UserDirAndRun(urls[0]).first);
    if (DownloadStatus(urls[0]) == 200 && DownloadStatus(urls[1]) == 200) ++live_runs;
  }
  BOOST_REQUIRE(user_dirs.size() == 1u);
  BOOST_TEST(FilesOnDisk(*user_dirs.begin()) == 4);
  BOOST_TEST(live_runs == 2);
}

// ---- Isolation of users ----------------------------------------------------------------

BOOST_AUTO_TEST_CASE(one_user_cannot_read_list_or_evict_another_users_files) {
  auto bob = RunAs("bob", "open('secret.txt', 'w').write('bob only')\n", kBobToken);
  const std::string bob_url = Urls(bob).at(0);
  const Link bob_link = ParseLink(bob_url);
  const auto [bob_dir, bob_run] = UserDirAndRun(bob_url);

  // Alice fills her quota three times over: only her own runs are evicted.
  std::vector<std::string> alice_urls;
  for (int i = 0; i < 3; ++i) {
    auto alice = RunAs("alice", WriteFiles("alice" + std::to_string(i), 4), kAliceToken);
    alice_urls = Urls(alice);
  }
  const auto [alice_dir, alice_run] = UserDirAndRun(alice_urls.at(0));
  BOOST_TEST(alice_dir != bob_dir);
  BOOST_TEST(bob_dir.find("bob") == std::string::npos);  // a keyed hash, not the id
  HttpResponse still = GetUrl(bob_url);
  BOOST_TEST(still.status == 200);
  BOOST_TEST(still.body == "bob only");

  // Alice cannot list or fetch Bob's files without a signature for each one, and her own
  // signatures do not carry over to his paths.
  const Link alice_link = ParseLink(alice_urls.at(0));
  for (const std::string& path : {std::string("/files/"), "/files/" + bob_dir + "/",
                                  "/files/" + bob_dir + "/" + bob_run + "/", bob_link.path,
                                  bob_link.path + "?md5=" + alice_link.md5 +
                                      "&expires=" + std::to_string(alice_link.expires)}) {
    HttpResponse response = GetWith(path, As(kAliceToken, "alice"));
    BOOST_TEST(response.status == 403, path << ": " << response.status);
    BOOST_TEST(response.body.find("bob only") == std::string::npos);
    BOOST_TEST(response.body.find(bob_run) == std::string::npos);
  }
  // Nor through a path trick from her own directory into his.
  for (const std::string& path :
       {"/files/" + alice_dir + "/../" + bob_dir + "/" + bob_run + "/secret.txt",
        "/files/" + alice_dir + "/%2e%2e/" + bob_dir + "/" + bob_run + "/secret.txt"}) {
    HttpResponse response =
        GetWith(path + "?md5=" + alice_link.md5 + "&expires=" + std::to_string(alice_link.expires),
                As(kAliceToken, "alice"));
    BOOST_TEST((response.status == 403 || response.status == 400), path << ": " << response.status);
    BOOST_TEST(response.body.find("bob only") == std::string::npos);
  }
}

BOOST_AUTO_TEST_SUITE_END()

// ---- Serving: headers per kind of file, hostile names (DESIGN.md §2) -------------------------
// A suite of its own: its stack has the default quota (the files here are many and small).

BOOST_AUTO_TEST_SUITE(ArtifactServing)

BOOST_AUTO_TEST_CASE(headers_per_kind_of_file) {
  struct Kind {
    const char* name;
    const char* mime;          // files[].mime (libmagic and the name)
    const char* content_type;  // what nginx serves
    const char* disposition;   // inline or attachment
  };
  const Kind kinds[] = {
      {"img.png", "image/png", "image/png", "inline"},
      {"img.jpg", "image/jpeg", "image/jpeg", "inline"},
      {"img.gif", "image/gif", "image/gif", "inline"},
      {"img.webp", "image/webp", "image/webp", "inline"},
      {"data.csv", "text/csv", "text/csv; charset=utf-8", "attachment"},
      {"book.xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
       "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", "attachment"},
      {"data.json", "application/json", "application/json; charset=utf-8", "attachment"},
      {"notes.txt", "text/plain", "text/plain; charset=utf-8", "attachment"},
      {"doc.pdf", "application/pdf", "application/pdf", "attachment"},
      {"page.html", "text/html", "application/octet-stream", "attachment"},
      {"pic.svg", "image/svg+xml", "application/octet-stream", "attachment"},
      {"feed.xml", "application/xml", "application/octet-stream", "attachment"},
      {"app.js", "text/javascript", "application/octet-stream", "attachment"},
      // HTML under a raster name: inline as image/png, which with nosniff never renders as
      // a page; files[].mime tells the truth.
      {"fake.png", "text/html", "image/png", "inline"},
  };
  auto doc = RunAs("kinds", R"py(from PIL import Image
from openpyxl import Workbook
for ext in ('png', 'jpg', 'gif', 'webp'):
    Image.new('RGB', (4, 3), (200, 30, 30)).save('img.' + ext)
open('data.csv', 'w').write('a,b\n1,2\n')
Workbook().save('book.xlsx')
open('data.json', 'w').write('{"a": 1}\n')
open('notes.txt', 'w').write('plain text\n')
open('doc.pdf', 'wb').write(b'%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n')
open('page.html', 'w').write('<!doctype html><html><body><script>alert(1)</script></body></html>\n')
open('pic.svg', 'w').write('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>\n')
open('feed.xml', 'w').write('<?xml version="1.0"?><feed><x>1</x></feed>\n')
open('app.js', 'w').write('alert(1);\n')
open('fake.png', 'w').write('<!doctype html><html><script>alert(1)</script></html>\n')
)py");
  BOOST_REQUIRE(Str(doc, "status") == "ok");
  std::string table =
      "\nfile | files[].mime | Content-Type | Content-Disposition | "
      "X-Content-Type-Options | Content-Security-Policy\n";
  for (const Kind& kind : kinds) {
    BOOST_TEST_CONTEXT(kind.name) {
      const rapidjson::Value* file = FindEntry(doc, "files", "path", kind.name);
      BOOST_REQUIRE(file != nullptr);
      BOOST_TEST(Str(*file, "mime") == kind.mime);
      HttpResponse download = GetUrl(Str(*file, "url"));
      BOOST_TEST(download.status == 200);
      BOOST_TEST(Sha256Hex(download.body) == Str(*file, "sha256"));
      BOOST_TEST(download.Header("Content-Type") == kind.content_type);
      auto raw = RawHeaders(Str(*file, "url").substr(Stack::Get().base_url().size()));
      BOOST_TEST(raw["content-type"] == kind.content_type);
      BOOST_TEST(raw["content-disposition"] ==
                 std::string(kind.disposition) + "; filename*=UTF-8''" + kind.name);
      BOOST_TEST(raw["x-content-type-options"] == "nosniff");
      BOOST_TEST(raw["content-security-policy"] == "sandbox; default-src 'none'");
      BOOST_TEST(raw["referrer-policy"] == "no-referrer");
      table += std::string(kind.name) + " | " + Str(*file, "mime") + " | " + raw["content-type"] +
               " | " + raw["content-disposition"] + " | " + raw["x-content-type-options"] + " | " +
               raw["content-security-policy"] + "\n";
    }
  }
  BOOST_TEST_MESSAGE("headers observed per kind of file:" << table);
}

BOOST_AUTO_TEST_CASE(hostile_names_download_with_a_safe_content_disposition) {
  const std::vector<std::string> names = {
      "new\nline.txt",
      "quo\"te.txt",
      "semi;colon.txt",
      "back\\slash.txt",
      "tab\there.txt",
      "naïve café 2024.csv",
      "percent%41.txt",
      "-rf",
      "'single'.txt",
      "a=b&c?.txt",
      std::string(246, 'n') + ".txt",  // 250 bytes
      "space name.png",
  };
  std::string code = "import json\nfor name in json.loads(";
  {
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
    w.StartArray();
    for (const auto& n : names) w.String(n.c_str(), static_cast<rapidjson::SizeType>(n.size()));
    w.EndArray();
    rapidjson::StringBuffer quoted;
    rapidjson::Writer<rapidjson::StringBuffer> q(quoted);
    q.String(buffer.GetString(), static_cast<rapidjson::SizeType>(buffer.GetSize()));
    code += quoted.GetString();
  }
  code += "):\n    open(name, 'w').write(name)\n";
  auto doc = RunAs("hostile", code);
  BOOST_REQUIRE(Str(doc, "status") == "ok");
  for (const std::string& name : names) {
    BOOST_TEST_CONTEXT("name '" << name << "'") {
      const rapidjson::Value* file = FindEntry(doc, "files", "path", name);
      BOOST_REQUIRE(file != nullptr);
      const std::string url = Str(*file, "url");
      BOOST_TEST(url.find_first_of(" \"'\n\t\\;") == std::string::npos, url);
      HttpResponse download = GetUrl(url);
      BOOST_TEST(download.status == 200);
      BOOST_TEST(download.body == name);
      const std::string disposition =
          RawHeaders(url.substr(Stack::Get().base_url().size()))["content-disposition"];
      const bool raster = name.size() > 4 && name.substr(name.size() - 4) == ".png";
      BOOST_TEST(disposition == std::string(raster ? "inline" : "attachment") +
                                    "; filename*=UTF-8''" + EncodeSegment(name));
      BOOST_TEST(disposition.find_first_of("\"\r\n\\") == std::string::npos, disposition);
    }
  }
  // A link written another way (raw bytes the daemon would have encoded) still downloads,
  // but gets no file name rather than one with a quote in it.
  const rapidjson::Value* quote = FindEntry(doc, "files", "path", "quo\"te.txt");
  BOOST_REQUIRE(quote != nullptr);
  Link link = ParseLink(Str(*quote, "url"));
  const size_t at = link.path.find("%22");
  BOOST_REQUIRE(at != std::string::npos);
  link.path.replace(at, 3, "\"");
  HttpResponse raw = Get(LinkPathAndQuery(link));
  BOOST_TEST(raw.status == 200);
  BOOST_TEST(RawHeaders(LinkPathAndQuery(link))["content-disposition"] == "attachment");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
