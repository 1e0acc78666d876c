#include "api/errors.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "util/text.h"

namespace sandrun::api {
namespace {

struct Row {
  ApiCode code;
  int status;
  const char* name;
};

// The one table of the API's refusals: status and code of each.
constexpr Row kTable[] = {
    {ApiCode::kInvalidJson, 400, "invalid_json"},
    {ApiCode::kMissingField, 400, "missing_field"},
    {ApiCode::kWrongType, 400, "wrong_type"},
    {ApiCode::kUnknownField, 400, "unknown_field"},
    {ApiCode::kDuplicateField, 400, "duplicate_field"},
    {ApiCode::kConflictingFields, 400, "conflicting_fields"},
    {ApiCode::kInvalidCode, 400, "invalid_code"},
    {ApiCode::kInvalidPath, 400, "invalid_path"},
    {ApiCode::kInvalidBase64, 400, "invalid_base64"},
    {ApiCode::kTooLarge, 400, "too_large"},
    {ApiCode::kLimitAboveCeiling, 400, "limit_above_ceiling"},
    {ApiCode::kLimitBelowMinimum, 400, "limit_below_minimum"},
    {ApiCode::kMissingSession, 400, "missing_session"},
    {ApiCode::kInvalidPackage, 400, "invalid_package"},
    {ApiCode::kUnknownLanguage, 400, "unknown_language"},
    {ApiCode::kBadBlock, 400, "bad_block"},
    {ApiCode::kNoRunnableCode, 400, "no_runnable_code"},
    {ApiCode::kInvalidInput, 400, "invalid_input"},
    {ApiCode::kOverBudget, 400, "over_budget"},
    {ApiCode::kFileLimit, 400, "file_limit"},
    {ApiCode::kMemoryLimit, 400, "memory_limit"},
    {ApiCode::kUnauthorized, 401, "unauthorized"},
    {ApiCode::kForbidden, 403, "forbidden"},
    {ApiCode::kUserForbidden, 403, "user_forbidden"},
    {ApiCode::kOriginForbidden, 403, "origin_forbidden"},
    {ApiCode::kNetworkForbidden, 403, "network_forbidden"},
    {ApiCode::kNotFound, 404, "not_found"},
    {ApiCode::kMethodNotAllowed, 405, "method_not_allowed"},
    {ApiCode::kSessionBusy, 409, "session_busy"},
    {ApiCode::kBodyTooLarge, 413, "body_too_large"},
    {ApiCode::kUnsupportedMediaType, 415, "unsupported_media_type"},
    {ApiCode::kRateLimited, 429, "rate_limited"},
    {ApiCode::kInternal, 500, "internal"},
    {ApiCode::kStorage, 500, "storage"},
    {ApiCode::kSandboxError, 500, "sandbox_error"},
    {ApiCode::kBusy, 503, "busy"},
    {ApiCode::kUnavailable, 503, "unavailable"},
    {ApiCode::kStopping, 503, "stopping"},
    {ApiCode::kEnvironmentBuilding, 503, "environment_building"},
};

ApiCode CodeOf(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidInput:
      return ApiCode::kInvalidInput;
    case ErrorKind::kInvalidPath:
      return ApiCode::kInvalidPath;
    case ErrorKind::kFileLimit:
      return ApiCode::kFileLimit;
    case ErrorKind::kOverBudget:
      return ApiCode::kOverBudget;
    case ErrorKind::kTooLarge:
      return ApiCode::kTooLarge;
    case ErrorKind::kBadBlock:
      return ApiCode::kBadBlock;
    case ErrorKind::kNoRunnableCode:
      return ApiCode::kNoRunnableCode;
    case ErrorKind::kBusy:
      return ApiCode::kSessionBusy;
    case ErrorKind::kUnavailable:
      return ApiCode::kBusy;
    case ErrorKind::kSystem:
    case ErrorKind::kProtocol:
    case ErrorKind::kRefused:
      return ApiCode::kInternal;
  }
  return ApiCode::kInternal;
}

// The API code of a refusal of the run engine (run/engine.h).
ApiCode CodeOf(const run::Refusal& refusal) {
  switch (refusal.code) {
    case run::RefusalCode::kError:
      return CodeOf(refusal.error_kind);
    case run::RefusalCode::kUnknownLanguage:
      return ApiCode::kUnknownLanguage;
    case run::RefusalCode::kConflictingFields:
      return ApiCode::kConflictingFields;
    case run::RefusalCode::kNetworkForbidden:
      return ApiCode::kNetworkForbidden;
    case run::RefusalCode::kMemoryLimit:
      return ApiCode::kMemoryLimit;
    case run::RefusalCode::kFileLimit:
      return ApiCode::kFileLimit;
    case run::RefusalCode::kSessionBusy:
      return ApiCode::kSessionBusy;
    case run::RefusalCode::kStorage:
      return ApiCode::kStorage;
    case run::RefusalCode::kSandboxError:
      return ApiCode::kSandboxError;
    case run::RefusalCode::kBusy:
      return ApiCode::kBusy;
    case run::RefusalCode::kUnavailable:
      return ApiCode::kUnavailable;
    case run::RefusalCode::kStopping:
      return ApiCode::kStopping;
    case run::RefusalCode::kEnvironmentBuilding:
      return ApiCode::kEnvironmentBuilding;
  }
  return ApiCode::kInternal;
}

std::string JsonString(const std::string& raw) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  std::string clean = util::SanitizeUtf8(raw);
  w.String(clean.data(), static_cast<rapidjson::SizeType>(clean.size()));
  return buffer.GetString();
}

}  // namespace

ApiStatus ApiStatusOf(ApiCode code) {
  for (const Row& row : kTable) {
    if (row.code == code) return {row.status, row.name};
  }
  return {500, "internal"};
}

ApiStatus ApiStatusOf(ErrorKind kind) { return ApiStatusOf(CodeOf(kind)); }

ApiError MakeApiError(ApiCode code, std::string message, std::string field) {
  const ApiStatus s = ApiStatusOf(code);
  return ApiError{s.status, s.code, std::move(message), std::move(field)};
}

ApiError ToApiError(const Error& error, const std::string& field) {
  return MakeApiError(CodeOf(error.kind), error.message, field);
}

ApiError ToApiError(const run::Refusal& refusal) {
  return MakeApiError(CodeOf(refusal), refusal.message, refusal.field);
}

HttpResponse ErrorResponse(const run::Refusal& refusal) {
  HttpResponse response = ErrorResponse(ToApiError(refusal));
  if (refusal.retry_after_s > 0) {
    response.headers["Retry-After"] = std::to_string(refusal.retry_after_s);
  }
  return response;
}

HttpResponse ErrorResponse(const Error& error, const std::string& field) {
  return ErrorResponse(ToApiError(error, field));
}

HttpResponse ErrorResponse(const ApiError& error) {
  HttpResponse response;
  response.status = error.status;
  response.body = "{\"error\":{\"code\":" + JsonString(error.code) +
                  ",\"message\":" + JsonString(error.message) +
                  (error.field.empty() ? "" : ",\"field\":" + JsonString(error.field)) + "}}";
  return response;
}

HttpResponse ErrorResponse(ApiCode code, const std::string& message, const std::string& field) {
  return ErrorResponse(MakeApiError(code, message, field));
}

}  // namespace sandrun::api
