#include "api/errors.h"

namespace sandrun::api {

ApiStatus ApiStatusOf(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidInput:
      return {400, "invalid_input"};
    case ErrorKind::kInvalidPath:
      return {400, "invalid_path"};
    case ErrorKind::kFileLimit:
      return {400, "file_limit"};
    case ErrorKind::kOverBudget:
      return {400, "over_budget"};
    case ErrorKind::kTooLarge:
      return {400, "too_large"};
    case ErrorKind::kBadBlock:
      return {400, "bad_block"};
    case ErrorKind::kNoRunnableCode:
      return {400, "no_runnable_code"};
    case ErrorKind::kBusy:
      return {409, "session_busy"};
    case ErrorKind::kUnavailable:
      return {503, "busy"};
    case ErrorKind::kSystem:
    case ErrorKind::kProtocol:
    case ErrorKind::kRefused:
      return {500, "internal"};
  }
  return {500, "internal"};
}

ApiError ToApiError(const Error& error, const std::string& field) {
  const ApiStatus s = ApiStatusOf(error.kind);
  return ApiError{s.status, s.code, error.message, field};
}

HttpResponse ErrorResponse(const Error& error, const std::string& field) {
  return ErrorResponse(ToApiError(error, field));
}

HttpResponse ErrorResponse(const ApiError& error) {
  return ErrorResponse(error.status, error.code, error.message, error.field);
}

}  // namespace sandrun::api
