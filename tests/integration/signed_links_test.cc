// Download links are checked by nginx's secure_link module (DESIGN.md §2): a bad signature is
// 403, an expired link 410, and the signature the daemon makes is the one nginx checks.
#include <boost/test/unit_test.hpp>
#include <string>

#include "helpers.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

// Runs a program that writes t.csv and returns its download link.
Link ExportCsv() {
  auto doc = PostRun(RunRequest("python",
                                "with open('/mnt/data/t.csv', 'w') as f:\n"
                                "    f.write('a,b\\n')\n"));
  BOOST_REQUIRE_MESSAGE(
      (doc.HasMember("files") && doc["files"].IsArray() && doc["files"].Size() == 1),
      "expected one exported file");
  return ParseLink(Str(doc["files"][0], "url"));
}

void CheckJsonError(const HttpResponse& response, int status, const std::string& code) {
  BOOST_TEST(response.status == status);
  BOOST_TEST(response.Header("Content-Type").rfind("application/json", 0) == 0);
  BOOST_TEST(response.Header("X-Content-Type-Options") == "nosniff");
  BOOST_TEST(ParseServiceError(response.body).code == code);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(SignedLinks)

BOOST_AUTO_TEST_CASE(daemon_link_is_valid_and_expires_within_ttl) {
  Link link = ExportCsv();
  const int64_t now = NowEpochS();
  BOOST_TEST(link.expires > now);
  BOOST_TEST(link.expires <= now + Stack::kLinkTtlS + 60);
  BOOST_TEST(Get(LinkPathAndQuery(link)).status == 200);
}

BOOST_AUTO_TEST_CASE(tampered_signature_is_403) {
  Link link = ExportCsv();
  link.md5[0] = link.md5[0] == 'A' ? 'B' : 'A';
  CheckJsonError(Get(LinkPathAndQuery(link)), 403, "forbidden");
}

BOOST_AUTO_TEST_CASE(missing_signature_is_403) {
  Link link = ExportCsv();
  CheckJsonError(Get(link.path), 403, "forbidden");
}

BOOST_AUTO_TEST_CASE(later_expiry_with_old_signature_is_403) {
  Link link = ExportCsv();
  link.expires += 3600;
  CheckJsonError(Get(LinkPathAndQuery(link)), 403, "forbidden");
}

BOOST_AUTO_TEST_CASE(our_signature_matches_nginx) {
  // Signed here with the secret of the state directory: proves the test's signing agrees with
  // nginx, so that the expired case below fails for its expiry alone.
  Link link = ExportCsv();
  BOOST_REQUIRE_MESSAGE(link.path.find('%') == std::string::npos, "path is encoded: " << link.path);
  link.expires = NowEpochS() + 300;
  link.md5 = SecureLinkMd5(link.path, link.expires, Stack::Get().LinkSecret());
  BOOST_TEST(Get(LinkPathAndQuery(link)).status == 200);
}

BOOST_AUTO_TEST_CASE(expired_link_is_410) {
  Link link = ExportCsv();
  link.expires = NowEpochS() - 60;
  link.md5 = SecureLinkMd5(link.path, link.expires, Stack::Get().LinkSecret());
  CheckJsonError(Get(LinkPathAndQuery(link)), 410, "link_expired");
}

BOOST_AUTO_TEST_CASE(run_directory_is_not_listed) {
  Link link = ExportCsv();
  link.path = link.path.substr(0, link.path.rfind('/') + 1);  // /files/<user-dir>/<run-id>/
  link.expires = NowEpochS() + 300;
  link.md5 = SecureLinkMd5(link.path, link.expires, Stack::Get().LinkSecret());
  HttpResponse response = Get(LinkPathAndQuery(link));
  BOOST_TEST((response.status == 403 || response.status == 404), "status " << response.status);
  BOOST_TEST(response.body.find("t.csv") == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
