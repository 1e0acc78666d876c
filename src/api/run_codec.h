// JSON codec of POST /run (DESIGN.md §2): request body -> RunRequest, RunResponse -> body.
// RapidJSON only; no hand-written JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api/errors.h"
#include "config/config.h"
#include "run/run_request.h"
#include "storage/artifact_store.h"
#include "util/result.h"

namespace sandrun::api {

// The request and result types are the engine's (run/run_request.h).
using run::CheckRelativePath;
using run::CodeStep;
using run::Display;
using run::EnvironmentReport;
using run::InputFile;
using run::KernelInfo;
using run::kMaxInputNameBytes;
using run::kMaxInputPathBytes;
using run::PlanEntry;
using run::RunRequest;
using run::RunResponse;
using run::RunStatus;
using run::RunStatusName;
using run::StepResult;
using run::StreamResult;

// Bounds on `files` (DESIGN.md §8: hostile names never escape; sizes capped).
constexpr size_t kMaxInputFiles = 100;

// Bounds of the JSON parse, enforced while parsing (a request nests 3 deep and holds a few
// hundred values): each value costs the document ~16 bytes and each level of nesting more,
// so without them 16 MiB of `[` took 400 MB.
constexpr int kMaxJsonDepth = 32;
constexpr size_t kMaxJsonValues = 10000;

// Decodes and validates `body` into a RunRequest, or returns why it is refused (an ApiError:
// status 400 unless said). `header_user` / `header_session` (X-Sandrun-User,
// X-Sandrun-Session) apply when the body has no `user` / `session`; both given and different:
// conflicting_fields. Errors: invalid_json (with offset; also nesting deeper than
// kMaxJsonDepth or more than kMaxJsonValues values), unknown_field, wrong_type, missing_field,
// conflicting_fields, unknown_language, limit_above_ceiling, limit_below_minimum, invalid_code,
// invalid_path, invalid_base64, too_large, network_forbidden (403), missing_session
// (`stateful` without a session), invalid_package (`packages`: more than kMaxPackages entries,
// or one outside run/requirements.h's grammar).
Result<RunRequest, ApiError> DecodeRunRequest(const std::string& body,
                                              const std::string& header_user,
                                              const std::string& header_session,
                                              const config::Config& config);

std::string EncodeRunResponse(const RunResponse& response);

}  // namespace sandrun::api
