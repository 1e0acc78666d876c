// Who may call POST /run and as whom, through the real nginx.
// The Access suite's ctest entry (CMakeLists.txt) requires tokens: kAlice is bound to user
// alice, kWebUi is a front end's (names its users), kPlain a plain token (a user of its own);
// allowed_origins is kGoodOrigin.
#include <httplib.h>

#include <boost/test/unit_test.hpp>
#include <string>

#include "helpers.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

constexpr char kAlice[] = "tok-alice-0123456789abcdef";
constexpr char kWebUi[] = "tok-webui-0123456789abcdef";
constexpr char kPlain[] = "tok-plain-0123456789abcdef";
constexpr char kGoodOrigin[] = "http://good.example";

// POST /run with `token`, `body`, the content type and extra headers.
HttpResponse Send(const char* token, const std::string& body, const httplib::Headers& extra = {},
                  const std::string& content_type = "application/json") {
  httplib::Client client("127.0.0.1", Stack::Get().port());
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(60, 0);
  httplib::Headers headers = extra;
  if (token != nullptr) headers.emplace("Authorization", std::string("Bearer ") + token);
  return FromResult(client.Post("/run", headers, body, content_type.c_str()), "POST /run");
}

std::string Bash(const std::string& code, const std::string& user = "",
                 const std::string& session = "") {
  std::string body = R"({"language":"bash","code":")" + code + "\"";
  if (!user.empty()) body += R"(,"user":")" + user + "\"";
  if (!session.empty()) body += R"(,"session":")" + session + "\"";
  return body + "}";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(Access)

// With a tokens file, token B with body `"user": "alice"` read and
// overwrote alice's session. A token bound to a user, or a plain one, acts as that user only.
BOOST_AUTO_TEST_CASE(token_cannot_act_for_another_user) {
  // Alice's session, written by her own token.
  HttpResponse own = Send(kAlice, Bash("echo secret > note.txt", "alice", "chat-a"));
  BOOST_TEST_REQUIRE(own.status == 200, own.body);
  for (const char* token : {kPlain, kAlice}) {
    const std::string other = token == kAlice ? "bob" : "alice";
    HttpResponse body_user = Send(token, Bash("cat note.txt", other, "chat-a"));
    BOOST_TEST(body_user.status == 403, body_user.body);
    const ServiceError error = ParseServiceError(body_user.body);
    BOOST_TEST(error.code == "user_forbidden");
    BOOST_TEST(error.field == "user");
    BOOST_TEST(body_user.body.find("secret") == std::string::npos);
    HttpResponse header_user =
        Send(token, Bash("cat note.txt", "", "chat-a"), {{"X-Sandrun-User", other}});
    BOOST_TEST(header_user.status == 403, header_user.body);
  }
  // Alice's token without a user acts as alice: her session is there.
  HttpResponse again = Send(kAlice, Bash("cat note.txt", "", "chat-a"));
  BOOST_TEST_REQUIRE(again.status == 200, again.body);
  BOOST_TEST(Str(ParseJson(again.body), "stdout") == "secret\n");
  // The plain token's own user is not alice: no note there.
  HttpResponse plain = Send(kPlain, Bash("cat note.txt 2>&1 || echo none", "", "chat-a"));
  BOOST_TEST_REQUIRE(plain.status == 200, plain.body);
  BOOST_TEST(Str(ParseJson(plain.body), "stdout").find("secret") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(front_end_names_its_users) {
  HttpResponse r = Send(kWebUi, Bash("echo hi"), {{"X-Sandrun-User", "carol"}});
  BOOST_TEST(r.status == 200, r.body);
  HttpResponse body_user = Send(kWebUi, Bash("echo hi", "carol"));
  BOOST_TEST(body_user.status == 200, body_user.body);
}

// The body's `user` silently beat the X-Sandrun-User header.
BOOST_AUTO_TEST_CASE(header_and_body_naming_different_users_are_refused) {
  HttpResponse r = Send(kWebUi, Bash("echo hi", "mallory"), {{"X-Sandrun-User", "carol"}});
  BOOST_TEST(r.status == 400, r.body);
  const ServiceError error = ParseServiceError(r.body);
  BOOST_TEST(error.code == "conflicting_fields");
  BOOST_TEST(error.field == "user");
}

// A web page could make a visitor's browser run code with a "simple"
// request (text/plain, a form), which needs no CORS preflight.
BOOST_AUTO_TEST_CASE(run_requires_a_json_content_type) {
  for (const std::string type :
       {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"}) {
    HttpResponse r = Send(kWebUi, Bash("echo ran"), {}, type);
    BOOST_TEST(r.status == 415, type << ": " << r.body);
    BOOST_TEST(ParseServiceError(r.body).code == "unsupported_media_type");
    BOOST_TEST(r.Header("Content-Type").rfind("application/json", 0) == 0u);
  }
  HttpResponse ok = Send(kWebUi, Bash("echo ran"), {}, "application/json; charset=utf-8");
  BOOST_TEST(ok.status == 200, ok.body);
}

// Requests from web pages of origins not in allowed_origins are refused,
// whatever their token.
BOOST_AUTO_TEST_CASE(run_refuses_origins_not_allowed) {
  HttpResponse evil = Send(kWebUi, Bash("echo ran"), {{"Origin", "http://evil.example"}});
  BOOST_TEST(evil.status == 403, evil.body);
  BOOST_TEST(ParseServiceError(evil.body).code == "origin_forbidden");
  BOOST_TEST(evil.body.find("ran") == std::string::npos);
  HttpResponse null_origin = Send(kWebUi, Bash("echo ran"), {{"Origin", "null"}});
  BOOST_TEST(null_origin.status == 403, null_origin.body);
  HttpResponse good = Send(kWebUi, Bash("echo ran"), {{"Origin", kGoodOrigin}});
  BOOST_TEST(good.status == 200, good.body);
  // A CORS preflight gets no permission either.
  httplib::Client client("127.0.0.1", Stack::Get().port());
  auto preflight = client.Options(
      "/run", {{"Origin", "http://evil.example"}, {"Access-Control-Request-Method", "POST"}});
  BOOST_REQUIRE(preflight);
  BOOST_TEST(preflight->status >= 400, preflight->status);
  BOOST_TEST(!preflight->has_header("Access-Control-Allow-Origin"));
}

// One identity, one bucket: nginx's per-user limit was keyed on token + X-Sandrun-User, so a
// token bound to alice sent with and without `X-Sandrun-User: alice` (the same user to the
// daemon) had two buckets of 20 at once: 40 requests alternating both ways were never limited.
// The daemon's limit counts alice once (10 r/s, 20 more at once). Bad JSON is refused at once
// after the limit: only the limit is measured.
BOOST_AUTO_TEST_CASE(a_bound_token_has_one_rate_limit_with_or_without_its_user_header) {
  int limited = 0;
  for (int i = 0; i < 40; ++i) {
    const httplib::Headers header =
        i % 2 == 0 ? httplib::Headers{} : httplib::Headers{{"X-Sandrun-User", "alice"}};
    HttpResponse r = Send(kAlice, "{", header);
    BOOST_TEST((r.status == 400 || r.status == 429), "status " << r.status << ": " << r.body);
    if (r.status == 429) {
      ++limited;
      BOOST_TEST(ParseServiceError(r.body).code == "rate_limited");
      BOOST_TEST(r.Header("Retry-After") == "1");
    }
  }
  BOOST_TEST_MESSAGE(limited << " of 40 requests of alice's token, half with her header, limited");
  BOOST_TEST(limited >= 10);
}

// nginx's limit was keyed on token + X-Sandrun-User, so a new header value
// per request was never limited. The token's own limit (30 r/s, burst 40) now holds whatever
// the header says (last in the suite: it spends kWebUi's budget). Bad JSON is refused at once by
// the daemon: only nginx's limit is measured.
BOOST_AUTO_TEST_CASE(rate_limit_holds_when_the_user_header_varies) {
  int limited = 0;
  for (int i = 0; i < 150; ++i) {
    HttpResponse r = Send(kWebUi, "{", {{"X-Sandrun-User", "u" + std::to_string(i)}});
    BOOST_TEST((r.status == 400 || r.status == 429), "status " << r.status);
    if (r.status == 429) ++limited;
  }
  BOOST_TEST_MESSAGE(limited << " of 150 requests with distinct X-Sandrun-User were limited");
  BOOST_TEST(limited > 0);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
