#define BOOST_TEST_MODULE api_errors
#include "api/errors.h"

#include <boost/test/unit_test.hpp>
#include <set>
#include <string>

using namespace sandrun;

namespace {

struct Expected {
  ErrorKind kind;
  int status;
  std::string code;
};

// The contract of util/result.h, row by row.
const Expected kContract[] = {
    {ErrorKind::kSystem, 500, "internal"},
    {ErrorKind::kInvalidInput, 400, "invalid_input"},
    {ErrorKind::kInvalidPath, 400, "invalid_path"},
    {ErrorKind::kFileLimit, 400, "file_limit"},
    {ErrorKind::kOverBudget, 400, "over_budget"},
    {ErrorKind::kTooLarge, 400, "too_large"},
    {ErrorKind::kBadBlock, 400, "bad_block"},
    {ErrorKind::kNoRunnableCode, 400, "no_runnable_code"},
    {ErrorKind::kBusy, 409, "session_busy"},
    {ErrorKind::kUnavailable, 503, "busy"},
    {ErrorKind::kProtocol, 500, "internal"},
    {ErrorKind::kRefused, 500, "internal"},
};

}  // namespace

BOOST_AUTO_TEST_SUITE(ApiErrors)

BOOST_AUTO_TEST_CASE(each_kind_maps_to_its_written_status_and_code) {
  for (const Expected& row : kContract) {
    const api::ApiStatus got = api::ApiStatusOf(row.kind);
    BOOST_TEST(got.status == row.status, ErrorKindName(row.kind));
    BOOST_TEST(std::string(got.code) == row.code, ErrorKindName(row.kind));
  }
}

BOOST_AUTO_TEST_CASE(client_kinds_keep_their_names_as_api_codes) {
  // The kinds a client sees as a 4xx keep the API code the old Error.code strings had.
  for (ErrorKind kind : {ErrorKind::kInvalidPath, ErrorKind::kFileLimit, ErrorKind::kTooLarge,
                         ErrorKind::kBadBlock, ErrorKind::kNoRunnableCode}) {
    BOOST_TEST(std::string(api::ApiStatusOf(kind).code) == ErrorKindName(kind));
  }
}

BOOST_AUTO_TEST_CASE(an_error_keeps_its_message_and_gets_the_field) {
  const Error error = MakeError(ErrorKind::kInvalidPath, "not a plain relative path: ../x");
  const api::ApiError api = api::ToApiError(error, "files");
  BOOST_TEST(api.status == 400);
  BOOST_TEST(api.code == "invalid_path");
  BOOST_TEST(api.message == "not a plain relative path: ../x");
  BOOST_TEST(api.field == "files");
}

BOOST_AUTO_TEST_CASE(the_response_is_the_one_error_body) {
  const Error error = MakeError(ErrorKind::kFileLimit, "cannot write a (the workspace is full?)");
  const api::HttpResponse r = api::ErrorResponse(error, "markdown");
  BOOST_TEST(r.status == 400);
  BOOST_TEST(r.body == R"j({"error":{"code":"file_limit","message":"cannot write a (the )j"
                       R"j(workspace is full?)","field":"markdown"}})j");
  const api::HttpResponse same =
      api::ErrorResponse(api::ApiCode::kFileLimit, error.message, "markdown");
  BOOST_TEST(r.body == same.body);
  const api::HttpResponse no_field = api::ErrorResponse(MakeError(ErrorKind::kBusy, "held"));
  BOOST_TEST(no_field.status == 409);
  BOOST_TEST(no_field.body == R"({"error":{"code":"session_busy","message":"held"}})");
}

BOOST_AUTO_TEST_CASE(every_api_code_has_its_own_code_and_an_error_status) {
  std::set<std::string> codes;
  for (int i = 0; i <= static_cast<int>(api::ApiCode::kEnvironmentBuilding); ++i) {
    const api::ApiStatus s = api::ApiStatusOf(static_cast<api::ApiCode>(i));
    BOOST_TEST_CONTEXT("ApiCode " << i << " " << s.code) {
      BOOST_TEST(s.status >= 400);
      BOOST_TEST(s.status <= 599);
      BOOST_TEST(codes.insert(s.code).second);  // no code twice, none missing (the fallback)
    }
  }
  // The contract's statuses of a few codes clients branch on (docs/DESIGN.md §2).
  BOOST_TEST(api::ApiStatusOf(api::ApiCode::kUnauthorized).status == 401);
  BOOST_TEST(api::ApiStatusOf(api::ApiCode::kUserForbidden).status == 403);
  BOOST_TEST(api::ApiStatusOf(api::ApiCode::kSessionBusy).status == 409);
  BOOST_TEST(api::ApiStatusOf(api::ApiCode::kBodyTooLarge).status == 413);
  BOOST_TEST(api::ApiStatusOf(api::ApiCode::kUnsupportedMediaType).status == 415);
  BOOST_TEST(api::ApiStatusOf(api::ApiCode::kBusy).status == 503);
  BOOST_TEST(std::string(api::ApiStatusOf(api::ApiCode::kBusy).code) == "busy");
}

BOOST_AUTO_TEST_SUITE_END()

// The run engine's refusals (run/refusal.h) become API errors here and nowhere else: each
// code its status and code, a phase's Error by its kind, Retry-After only when one is given.
BOOST_AUTO_TEST_CASE(each_engine_refusal_maps_to_its_status_code_and_retry) {
  struct Row {
    run::RefusalCode code;
    int status;
    std::string name;
  };
  const Row rows[] = {
      {run::RefusalCode::kUnknownLanguage, 400, "unknown_language"},
      {run::RefusalCode::kConflictingFields, 400, "conflicting_fields"},
      {run::RefusalCode::kNetworkForbidden, 403, "network_forbidden"},
      {run::RefusalCode::kMemoryLimit, 400, "memory_limit"},
      {run::RefusalCode::kFileLimit, 400, "file_limit"},
      {run::RefusalCode::kSessionBusy, 409, "session_busy"},
      {run::RefusalCode::kStorage, 500, "storage"},
      {run::RefusalCode::kSandboxError, 500, "sandbox_error"},
      {run::RefusalCode::kBusy, 503, "busy"},
      {run::RefusalCode::kUnavailable, 503, "unavailable"},
      {run::RefusalCode::kStopping, 503, "stopping"},
      {run::RefusalCode::kEnvironmentBuilding, 503, "environment_building"},
  };
  for (const Row& row : rows) {
    const api::ApiError e = api::ToApiError(run::Refuse(row.code, "why", "limits.disk_mb"));
    BOOST_TEST(e.status == row.status, row.name);
    BOOST_TEST(e.code == row.name);
    BOOST_TEST(e.message == "why");
    BOOST_TEST(e.field == "limits.disk_mb");
  }
  const api::ApiError bad =
      api::ToApiError(run::RefuseError(MakeError(ErrorKind::kInvalidPath, "no"), "files"));
  BOOST_TEST(bad.status == 400);
  BOOST_TEST(bad.code == "invalid_path");
  BOOST_TEST(bad.field == "files");

  BOOST_TEST(api::ErrorResponse(run::Refuse(run::RefusalCode::kStorage, "x")).headers.empty());
  run::Refusal busy = run::Refuse(run::RefusalCode::kSessionBusy, "wait", "session");
  busy.retry_after_s = 5;
  const api::HttpResponse r = api::ErrorResponse(busy);
  BOOST_TEST(r.status == 409);
  BOOST_TEST(r.headers.at("Retry-After") == "5");
  BOOST_TEST(r.body == R"({"error":{"code":"session_busy","message":"wait","field":"session"}})");
}
