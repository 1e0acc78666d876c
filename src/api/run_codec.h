// JSON codec of POST /run (DESIGN.md §2): request body -> RunRequest, RunResponse -> body.
// RapidJSON only; no hand-written JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "storage/artifact_store.h"

namespace sandrun::api {

// A refused request: HTTP status, machine code, human message, offending field ("" if none).
struct ApiError {
  int status = 400;
  std::string code;
  std::string message;
  std::string field;
};

struct RunRequest {
  const config::Language* language = nullptr;
  std::string code;
  std::string stdin_data;
  std::string user = "anonymous";
  config::Limits limits;  // defaults, lowered or raised (up to the ceilings) by the request
};

// Decodes and validates `body`. `header_user` (X-Sandrun-User) applies when the body has no
// `user`. Errors: invalid_json (with offset), unknown_field, wrong_type, missing_field,
// unknown_language, limit_above_ceiling, not_supported (a v1 field this build does not
// implement yet), network_forbidden (403).
std::optional<ApiError> DecodeRunRequest(const std::string& body, const std::string& header_user,
                                         const config::Config& config, RunRequest* out);

struct StreamResult {
  std::string text;  // raw bytes; encoded with invalid UTF-8 replaced by U+FFFD
  bool truncated = false;
};

struct RunResponse {
  std::string id;
  std::string status;  // ok, error, killed, timeout, memory_limit, output_limit, file_limit
  std::optional<int> exit_code;
  std::optional<int> signal;
  StreamResult stdout_stream;
  StreamResult stderr_stream;
  std::vector<storage::ArtifactFile> files;
  std::vector<storage::SkippedFile> files_skipped;
  int64_t wall_ms = 0;
  int64_t cpu_ms = 0;
  int64_t max_rss_kb = 0;
  config::Limits limits;
};

std::string EncodeRunResponse(const RunResponse& response);

}  // namespace sandrun::api
