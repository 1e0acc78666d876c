// The API's side of the error contract (util/result.h): what a refused request looks like, and
// the one place where an Error's kind becomes an HTTP status and an API code.
#pragma once

#include <string>

#include "api/http.h"
#include "util/result.h"

namespace sandrun::api {

// A refused request: HTTP status, machine code, human message, offending field ("" if none).
// Sent as {"error":{"code","message","field"}} (ErrorResponse in http.h).
struct ApiError {
  int status = 400;
  std::string code;
  std::string message;
  std::string field;
};

// The HTTP status and API code of an Error kind:
//   kInvalidPath 400 invalid_path, kFileLimit 400 file_limit, kOverBudget 400 over_budget,
//   kTooLarge 400 too_large, kBadBlock 400 bad_block, kNoRunnableCode 400 no_runnable_code,
//   kInvalidInput 400 invalid_input, kBusy 409 session_busy, kUnavailable 503 busy,
//   kSystem / kProtocol / kRefused 500 internal.
// A call site that has always sent its own 500 code for a failed step (storage,
// sandbox_error) keeps it; this table covers what a kind means to a client.
struct ApiStatus {
  int status;
  const char* code;
};
ApiStatus ApiStatusOf(ErrorKind kind);

// `error` as an API error: ApiStatusOf(error.kind), error.message and `field`.
ApiError ToApiError(const Error& error, const std::string& field = "");

// The response of ToApiError(error, field).
HttpResponse ErrorResponse(const Error& error, const std::string& field = "");

// The response of a refused request (ErrorResponse of its status, code, message and field).
HttpResponse ErrorResponse(const ApiError& error);

}  // namespace sandrun::api
