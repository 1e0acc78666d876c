#define BOOST_TEST_MODULE access
#include "api/access.h"

#include <boost/test/unit_test.hpp>

using namespace sandrun;
using Kind = config::Token::Kind;

namespace {

config::Config WithTokens(bool anonymous) {
  config::Config c;
  c.allow_anonymous = anonymous;
  c.tokens = {{"tok-alice", Kind::kBoundUser, "alice"},
              {"tok-webui", Kind::kFrontEnd, ""},
              {"tok-plain", Kind::kOwnUser, config::OwnUserName("tok-plain")}};
  return c;
}

api::RunRequest Named(const std::string& user) {
  api::RunRequest run;
  if (!user.empty()) {
    run.user = user;
    run.user_named = true;
  }
  return run;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(Access)

BOOST_AUTO_TEST_CASE(finds_the_token_of_the_bearer_header) {
  const config::Config c = WithTokens(false);
  api::Caller caller = api::Authenticate("Bearer tok-webui", c);
  BOOST_TEST(caller.authenticated);
  BOOST_TEST_REQUIRE(caller.token != nullptr);
  BOOST_TEST(caller.token->secret == "tok-webui");
  for (const char* bad :
       {"", "Bearer ", "Bearer tok-webui ", "bearer tok-webui", "tok-webui", "Bearer tok-webu"}) {
    BOOST_TEST(!api::Authenticate(bad, c).authenticated, bad);
  }
}

BOOST_AUTO_TEST_CASE(anonymous_callers_only_when_allowed) {
  const config::Config c = WithTokens(true);
  api::Caller caller = api::Authenticate("", c);
  BOOST_TEST(caller.authenticated);
  BOOST_TEST(caller.token == nullptr);
  api::RunRequest run = Named("anyone");
  BOOST_TEST(!api::ApplyTokenBinding(caller, &run));
  BOOST_TEST(run.user == "anyone");
}

// With a tokens file, token B with `"user": "alice"` read and overwrote
// alice's session.
BOOST_AUTO_TEST_CASE(bound_token_may_not_name_another_user) {
  const config::Config c = WithTokens(false);
  const api::Caller alice = api::Authenticate("Bearer tok-alice", c);
  api::RunRequest run = Named("bob");
  auto err = api::ApplyTokenBinding(alice, &run);
  BOOST_TEST_REQUIRE(err.has_value());
  BOOST_TEST(err->status == 403);
  BOOST_TEST(err->code == "user_forbidden");
  BOOST_TEST(err->field == "user");
  BOOST_TEST(err->message.find("'bob'") != std::string::npos);

  api::RunRequest own = Named("alice");
  BOOST_TEST(!api::ApplyTokenBinding(alice, &own));
  BOOST_TEST(own.user == "alice");
  api::RunRequest unnamed = Named("");
  BOOST_TEST(!api::ApplyTokenBinding(alice, &unnamed));
  BOOST_TEST(unnamed.user == "alice");
}

BOOST_AUTO_TEST_CASE(plain_token_acts_as_its_own_user) {
  const config::Config c = WithTokens(false);
  const api::Caller plain = api::Authenticate("Bearer tok-plain", c);
  api::RunRequest unnamed = Named("");
  BOOST_TEST(!api::ApplyTokenBinding(plain, &unnamed));
  BOOST_TEST(unnamed.user == config::OwnUserName("tok-plain"));
  api::RunRequest anonymous = Named("anonymous");
  auto err = api::ApplyTokenBinding(plain, &anonymous);
  BOOST_TEST_REQUIRE(err.has_value());
  BOOST_TEST(err->message.find("front_end") != std::string::npos, err->message);
}

BOOST_AUTO_TEST_CASE(front_end_names_its_users) {
  const config::Config c = WithTokens(false);
  const api::Caller webui = api::Authenticate("Bearer tok-webui", c);
  api::RunRequest run = Named("alice");
  BOOST_TEST(!api::ApplyTokenBinding(webui, &run));
  BOOST_TEST(run.user == "alice");
  api::RunRequest unnamed = Named("");
  BOOST_TEST(!api::ApplyTokenBinding(webui, &unnamed));
  BOOST_TEST(unnamed.user == "anonymous");
}

// Any web page could POST a JSON body as text/plain (no CORS preflight).
BOOST_AUTO_TEST_CASE(only_json_bodies_are_taken) {
  for (const char* ok : {"application/json", "Application/JSON", "application/json; charset=utf-8",
                         "application/json;charset=\"UTF-8\"", " application/json ;"}) {
    BOOST_TEST(!api::CheckContentType(ok), ok);
  }
  for (const char* bad :
       {"", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
        "application/jsonx", "application/json; charset=latin1", "text/json"}) {
    auto err = api::CheckContentType(bad);
    BOOST_TEST_REQUIRE(err.has_value(), bad);
    BOOST_TEST(err->status == 415);
    BOOST_TEST(err->code == "unsupported_media_type");
    BOOST_TEST(err->message.find("Content-Type: application/json") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(origins_must_be_listed) {
  const std::vector<std::string> allowed = {"https://chat.example.org"};
  BOOST_TEST(!api::CheckOrigin("", allowed));
  BOOST_TEST(!api::CheckOrigin("https://chat.example.org", allowed));
  BOOST_TEST(!api::CheckOrigin("HTTPS://Chat.Example.org/", allowed));
  for (const char* bad : {"null", "https://evil.example", "https://chat.example.org.evil",
                          "http://chat.example.org"}) {
    auto err = api::CheckOrigin(bad, allowed);
    BOOST_TEST_REQUIRE(err.has_value(), bad);
    BOOST_TEST(err->status == 403);
    BOOST_TEST(err->code == "origin_forbidden");
  }
  BOOST_TEST(api::CheckOrigin("http://localhost:8080", {}).has_value());
}

BOOST_AUTO_TEST_CASE(address_ranges_match_by_prefix) {
  BOOST_TEST(api::AddressInRange("10.1.2.3", "10.0.0.0/8"));
  BOOST_TEST(!api::AddressInRange("11.1.2.3", "10.0.0.0/8"));
  BOOST_TEST(api::AddressInRange("192.0.2.10", "192.0.2.10"));
  BOOST_TEST(!api::AddressInRange("192.0.2.11", "192.0.2.10"));
  BOOST_TEST(api::AddressInRange("192.0.2.11", "192.0.2.10/31"));
  BOOST_TEST(!api::AddressInRange("192.0.2.12", "192.0.2.10/31"));
  BOOST_TEST(api::AddressInRange("203.0.113.7", "0.0.0.0/0"));
  BOOST_TEST(!api::AddressInRange("2001:db8::1", "0.0.0.0/0"));
  BOOST_TEST(api::AddressInRange("::ffff:10.0.0.1", "10.0.0.0/8"));
  BOOST_TEST(api::AddressInRange("2001:db8::1", "2001:db8::/32"));
  BOOST_TEST(!api::AddressInRange("2001:db9::1", "2001:db8::/32"));
  BOOST_TEST(api::AddressInRange("::1", "::1"));
  BOOST_TEST(!api::AddressInRange("10.0.0.1", "::/0"));
  for (const char* bad : {"", "example.org", "10.0.0.1;", "10.0.0.1/8"}) {
    BOOST_TEST(!api::AddressInRange(bad, "0.0.0.0/0"), bad);
  }
  for (const char* bad : {"10.0.0.0/33", "10.0.0.0/", "10.0.0.0/x", "x/8"}) {
    BOOST_TEST(!api::AddressInRange("10.0.0.1", bad), bad);
  }
}

BOOST_AUTO_TEST_CASE(health_answers_this_host_the_allow_list_and_tokens) {
  config::Config c = WithTokens(true);
  c.health_allow_ranges = {"198.51.100.0/24"};
  for (const char* local : {"127.0.0.1", "127.0.0.2", "::1"}) {
    BOOST_TEST(!api::CheckHealthAccess(local, "", c).has_value(), local);
  }
  BOOST_TEST(!api::CheckHealthAccess("198.51.100.9", "", c).has_value());
  BOOST_TEST(!api::CheckHealthAccess("203.0.113.7", "Bearer tok-plain", c).has_value());
  // allow_anonymous opens runs, not health; an unknown token is no token.
  for (const char* authorization : {"", "Bearer nope", "tok-plain"}) {
    auto refused = api::CheckHealthAccess("203.0.113.7", authorization, c);
    BOOST_TEST_REQUIRE(refused.has_value(), authorization);
    BOOST_TEST(refused->status == 403);
    BOOST_TEST(refused->code == "forbidden");
    BOOST_TEST(refused->field == "health_allow");
    BOOST_TEST(refused->message.find("203.0.113.7") != std::string::npos);
  }
  BOOST_TEST(api::CheckHealthAccess("", "", c).has_value());
}

BOOST_AUTO_TEST_SUITE_END()
