// The API's side of the error contract (util/result.h): what a refused request looks like, and
// the one place where an Error's kind becomes an HTTP status and an API code.
#pragma once

#include <string>
#include <utility>

#include "api/http.h"
#include "run/refusal.h"
#include "util/result.h"

namespace sandrun::api {

// A refused request: HTTP status, machine code, human message, offending field ("" if none).
// Sent as {"error":{"code","message","field"}} (ErrorResponse). Made by MakeApiError or
// ToApiError, never by hand (scripts/lib/check_error_table.py).
struct ApiError {
  int status = 400;
  std::string code;
  std::string message;
  std::string field;
};

// Every refusal the API answers with. errors.cc's table gives each its HTTP status and its
// code (docs/DESIGN.md §2 and its Additions name them); no other file writes a status or a
// code by hand (lint.ErrorTable).
enum class ApiCode {
  kInvalidJson,           // 400 invalid_json: the body is not JSON, or nests or holds too much
  kMissingField,          // 400 missing_field: a required field is absent
  kWrongType,             // 400 wrong_type: a field or header has the wrong type or value
  kUnknownField,          // 400 unknown_field: a field the API does not know
  kDuplicateField,        // 400 duplicate_field: a field given twice
  kConflictingFields,     // 400 conflicting_fields: fields that exclude each other
  kInvalidCode,           // 400 invalid_code: code with a NUL byte
  kInvalidPath,           // 400 invalid_path: a path that is not plain and relative
  kInvalidBase64,         // 400 invalid_base64: an input file's content_base64
  kTooLarge,              // 400 too_large: an input over its size limit
  kLimitAboveCeiling,     // 400 limit_above_ceiling: a limit over the config's ceiling
  kLimitBelowMinimum,     // 400 limit_below_minimum: a limit under its minimum
  kMissingSession,        // 400 missing_session: a stateful run without a session
  kInvalidPackage,        // 400 invalid_package: a package outside the requirement grammar
  kUnknownLanguage,       // 400 unknown_language: a language the config does not run
  kBadBlock,              // 400 bad_block: a markdown 'block' that does not exist
  kNoRunnableCode,        // 400 no_runnable_code: nothing to run in the message
  kInvalidInput,          // 400 invalid_input: other bad input
  kOverBudget,            // 400 over_budget: the user's budget refused the run
  kFileLimit,             // 400 file_limit: the user's quota refused the files
  kMemoryLimit,           // 400 memory_limit: the session does not fit the run's memory
  kUnauthorized,          // 401 unauthorized: no valid bearer token
  kForbidden,             // 403 forbidden: health or metrics from elsewhere, no token
  kUserForbidden,         // 403 user_forbidden: a bound token naming another user
  kOriginForbidden,       // 403 origin_forbidden: an Origin not in allowed_origins
  kNetworkForbidden,      // 403 network_forbidden: network asked where the config forbids it
  kNotFound,              // 404 not_found: no such endpoint
  kMethodNotAllowed,      // 405 method_not_allowed: the endpoint takes another method
  kSessionBusy,           // 409 session_busy: the session's waiters are full
  kBodyTooLarge,          // 413 body_too_large: the body is over the request size limit
  kUnsupportedMediaType,  // 415 unsupported_media_type: POST /run without JSON
  kRateLimited,           // 429 rate_limited: the user's requests are over their rate
  kInternal,              // 500 internal: the daemon failed
  kStorage,               // 500 storage: the store failed
  kSandboxError,          // 500 sandbox_error: a sandbox could not be made or run
  kBusy,                  // 503 busy: every sandbox is busy; retry
  kUnavailable,           // 503 unavailable: the host cannot run this
  kStopping,              // 503 stopping: the daemon is stopping; retry
  // 503 environment_building: the prepared environment is being built; retry. Last (errors_test
  // walks the codes up to it).
  kEnvironmentBuilding,
};

// The HTTP status and API code of an Error kind (the table's row of its ApiCode):
//   kInvalidPath 400 invalid_path, kFileLimit 400 file_limit, kOverBudget 400 over_budget,
//   kTooLarge 400 too_large, kBadBlock 400 bad_block, kNoRunnableCode 400 no_runnable_code,
//   kInvalidInput 400 invalid_input, kBusy 409 session_busy, kUnavailable 503 busy,
//   kSystem / kProtocol / kRefused 500 internal.
// A call site that has always sent its own 500 code for a failed step (kStorage,
// kSandboxError) names it; this mapping covers what a kind means to a client.
struct ApiStatus {
  int status;
  const char* code;
};
ApiStatus ApiStatusOf(ErrorKind kind);

// The status and code of `code` (the table).
ApiStatus ApiStatusOf(ApiCode code);

// A refusal with `code`'s status and code.
ApiError MakeApiError(ApiCode code, std::string message, std::string field = "");

// `error` as an API error: ApiStatusOf(error.kind), error.message and `field`.
ApiError ToApiError(const Error& error, const std::string& field = "");

// A refusal of the run engine as an API error: its RefusalCode's ApiCode (kError: its
// Error kind's, as ToApiError of an Error), message and field.
ApiError ToApiError(const run::Refusal& refusal);
// The response of ToApiError(refusal), with Retry-After when the refusal gives one.
HttpResponse ErrorResponse(const run::Refusal& refusal);

// The response of ToApiError(error, field).
HttpResponse ErrorResponse(const Error& error, const std::string& field = "");

// The response of a refused request: {"error":{"code","message","field"}} with its status
// (`field` omitted when empty).
HttpResponse ErrorResponse(const ApiError& error);

// The response of MakeApiError(code, message, field).
HttpResponse ErrorResponse(ApiCode code, const std::string& message, const std::string& field = "");

}  // namespace sandrun::api
