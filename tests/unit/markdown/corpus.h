// Helpers for the markdown tests: reading files, expected plans in JSON, and the invariants
// every plan must keep whatever the message.
#pragma once

#include <rapidjson/document.h>

#include <string>
#include <string_view>

#include "markdown/run_plan.h"

namespace sandrun::markdown::testing {

// The whole file; empty if it cannot be read.
std::string ReadFile(const std::string& path);

// LF line endings turned into CRLF.
std::string ToCrlf(std::string_view text);

// `plan` and steps as compact JSON (for failure messages and reports), or the error.
std::string ResultToJson(const Result<RunPlan>& result, bool with_code = false);

// Checks `result` against an expected document (see tests/data/messages/README.md);
// failures name `name`.
void CheckExpected(const std::string& name, const Result<RunPlan>& result,
                   const rapidjson::Value& expected);

// Properties every result must have: one plan entry per fenced block, in order, each with a
// reason; at least one step that runs; steps in document order; safe save_as paths; no CR in
// code; with `block`, only that block runs.
void CheckInvariants(const std::string& name, std::string_view markdown, int block,
                     const Result<RunPlan>& result);

}  // namespace sandrun::markdown::testing
