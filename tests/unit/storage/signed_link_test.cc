// Tests for storage/signed_link.cc: the signature is nginx secure_link's, byte for byte.
#define BOOST_TEST_MODULE storage_signed_link
#include "storage/signed_link.h"

#include <stdio.h>

#include <boost/test/unit_test.hpp>
#include <string>

#include "test_util.h"

namespace sandrun::storage {
namespace {

// Runs the pipeline from nginx's secure_link documentation on the bytes in `input_file`.
// Returns "" when the openssl command-line tool is not installed.
std::string OpensslSecureLink(const std::string& input_file) {
  const std::string command = "command -v openssl >/dev/null && openssl md5 -binary < '" +
                              input_file + "' | openssl base64 | tr +/ -_ | tr -d '=\\n'";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return "";
  std::string out;
  char buf[256];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  pclose(pipe);
  return out;
}

bool IsBase64UrlNoPad(const std::string& s) {
  for (const char c : s) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(SignedLink)

BOOST_AUTO_TEST_CASE(matches_nginx_documentation_vector) {
  // https://nginx.org/en/docs/http/ngx_http_secure_link_module.html: with
  //   secure_link_md5 "$secure_link_expires$uri$remote_addr secret";
  // the link for /s/link from 127.0.0.1 expiring at 2147483647 is
  //   echo -n '2147483647/s/link127.0.0.1 secret' | openssl md5 -binary | openssl base64 |
  //   tr +/ -_ | tr -d =   ->   _e4Nc3iduzkWRm01TBBNYw
  // Our form has no $remote_addr; the string is a plain concatenation, so passing
  // "/s/link127.0.0.1" as the uri reproduces the documented input exactly.
  BOOST_TEST(SecureLinkMd5("/s/link127.0.0.1", 2147483647, "secret") == "_e4Nc3iduzkWRm01TBBNYw");
}

BOOST_AUTO_TEST_CASE(matches_openssl_command_line) {
  testing::TempDir dir;
  struct Case {
    std::string uri;
    int64_t expires;
    std::string secret;
  };
  const Case cases[] = {
      {"/files/0123456789abcdef0123456789abcdef/run-1/plot.png", 1700003600, "s3cr3t"},
      {"/files/u/r/my report #1.csv", 1, "with space"},
      {"/files/u/r/new\nline/bad\xff\xfe", 4102444800, "x"},
      {"/", 0, ""},
  };
  for (const Case& c : cases) {
    const std::string input = std::to_string(c.expires) + c.uri + " " + c.secret;
    testing::WriteFile(dir / "input", input);
    const std::string expected = OpensslSecureLink(dir / "input");
    // scripts/packages/build.txt installs it: a machine without it is not set up.
    BOOST_TEST_REQUIRE(
        !expected.empty(),
        "the openssl command-line tool is not installed (scripts/packages/build.txt)");
    BOOST_TEST(SecureLinkMd5(c.uri, c.expires, c.secret) == expected);
  }
}

BOOST_AUTO_TEST_CASE(is_unpadded_base64url) {
  for (int64_t expires = 1700000000; expires < 1700000200; ++expires) {
    const std::string sig = SecureLinkMd5("/files/a/b/c", expires, "k");
    BOOST_TEST(sig.size() == 22u);  // 16 bytes of MD5 -> 22 base64 characters without "=="
    BOOST_TEST(IsBase64UrlNoPad(sig), sig);
  }
}

BOOST_AUTO_TEST_CASE(changes_with_every_input) {
  const std::string base = SecureLinkMd5("/files/a", 100, "secret");
  BOOST_TEST(SecureLinkMd5("/files/b", 100, "secret") != base);
  BOOST_TEST(SecureLinkMd5("/files/a", 101, "secret") != base);
  BOOST_TEST(SecureLinkMd5("/files/a", 100, "secreT") != base);
}

BOOST_AUTO_TEST_CASE(percent_encodes_all_but_unreserved_and_slash) {
  BOOST_TEST(PercentEncodePath("/files/ab/run/Plot_1-v2.0~x.png") ==
             "/files/ab/run/Plot_1-v2.0~x.png");
  BOOST_TEST(PercentEncodePath("/a b/#?%&+=;") == "/a%20b/%23%3F%25%26%2B%3D%3B");
  BOOST_TEST(PercentEncodePath("new\nline\xff\xfe") == "new%0Aline%FF%FE");
  BOOST_TEST(PercentEncodePath("-rf") == "-rf");
  BOOST_TEST(PercentEncodePath("caf\xc3\xa9") == "caf%C3%A9");
  BOOST_TEST(PercentEncodePath(std::string("nul\0x", 5)) == "nul%00x");
  BOOST_TEST(PercentEncodePath("") == "");
}

BOOST_AUTO_TEST_CASE(user_dir_is_truncated_hmac_sha256) {
  // RFC 4231 test case 2: HMAC-SHA-256(key "Jefe", "what do ya want for nothing?") =
  // 5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843.
  BOOST_TEST(UserDir("what do ya want for nothing?", "Jefe") == "5bdcc146bf60754e6a042426089575c7");
}

BOOST_AUTO_TEST_CASE(user_dir_depends_on_user_and_key_and_is_path_safe) {
  const std::string a = UserDir("alice", "key1");
  BOOST_TEST(a.size() == 32u);
  BOOST_TEST(a.find_first_not_of("0123456789abcdef") == std::string::npos);
  BOOST_TEST(UserDir("alice", "key1") == a);
  BOOST_TEST(UserDir("bob", "key1") != a);
  BOOST_TEST(UserDir("alice", "key2") != a);
  BOOST_TEST(UserDir("../../etc", "key1").find('/') == std::string::npos);
}

BOOST_AUTO_TEST_CASE(link_base_url_is_built_from_scheme_host_and_prefix) {
  BOOST_TEST(LinkBaseUrl("https", "sandrun.example.org", "") == "https://sandrun.example.org");
  BOOST_TEST(LinkBaseUrl("http", "127.0.0.1:8080", "/sandbox/") == "http://127.0.0.1:8080/sandbox");
  BOOST_TEST(LinkBaseUrl("https", "[::1]:8443", "/a/b-c") == "https://[::1]:8443/a/b-c");
}

BOOST_AUTO_TEST_CASE(link_base_url_refuses_hostile_header_values) {
  // Each bad part falls back alone; none can reach the URL.
  BOOST_TEST(LinkBaseUrl("javascript", "h.example", "") == "http://h.example");
  BOOST_TEST(LinkBaseUrl("https", "evil.example/x?", "") == "https://127.0.0.1");
  BOOST_TEST(LinkBaseUrl("https", "a\"b", "") == "https://127.0.0.1");
  BOOST_TEST(LinkBaseUrl("https", "a@b", "") == "https://127.0.0.1");
  BOOST_TEST(LinkBaseUrl("https", "a b", "") == "https://127.0.0.1");
  BOOST_TEST(LinkBaseUrl("https", "", "") == "https://127.0.0.1");
  BOOST_TEST(LinkBaseUrl("https", "h", "sandbox") == "https://h");
  BOOST_TEST(LinkBaseUrl("https", "h", "//evil.example") == "https://h");
  BOOST_TEST(LinkBaseUrl("https", "h", "/a/../b") == "https://h");
  BOOST_TEST(LinkBaseUrl("https", "h", "/a/./b") == "https://h");
  BOOST_TEST(LinkBaseUrl("https", "h", "/a\r\nX: y") == "https://h");
  BOOST_TEST(LinkBaseUrl("https", "h", "/a%2F") == "https://h");
  BOOST_TEST(LinkBaseUrl("https", "h", "/a?b") == "https://h");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::storage
