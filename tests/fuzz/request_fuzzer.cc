// Fuzz target for the POST /run request decoder (api/run_codec.h): any bytes must give a
// decoded request or an ApiError with a 4xx status and a message, never a crash, a leak or
// a hang; a decoded request must satisfy the decoder's own guarantees.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "api/run_codec.h"

namespace {

const sandrun::config::Config& FuzzConfig() {
  static const sandrun::config::Config config = [] {
    sandrun::config::Config c;
    c.languages = {{"python", {"py", "python3"}, "main.py", {"/usr/bin/python3", "{file}"}},
                   {"bash", {"sh", "shell"}, "main.sh", {"/bin/bash", "{file}"}}};
    return c;
  }();
  return config;
}

void Check(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  auto decoded =
      sandrun::api::DecodeRunRequest(body, "header-user", "header-session", FuzzConfig());
  if (!decoded.ok()) {
    const sandrun::api::ApiError& error = decoded.error();
    Check(error.status >= 400 && error.status < 500);
    Check(!error.code.empty() && !error.message.empty());
    return 0;
  }
  const sandrun::api::RunRequest& request = *decoded;
  // What the decoder promises for an accepted request.
  Check(!request.steps.empty() || request.markdown.has_value());
  for (const auto& step : request.steps) {
    Check(step.language != nullptr);
    Check(step.code.find('\0') == std::string::npos);
  }
  for (const auto& file : request.files) {
    Check(sandrun::api::CheckRelativePath(file.path).empty());
  }
  const auto& ceilings = FuzzConfig().ceilings;
  for (const auto& key : sandrun::config::LimitKeys()) {
    Check(request.limits.*(key.member) <= ceilings.*(key.member));
    Check(request.limits.*(key.member) >= key.min);
  }
  Check(!request.user.empty() && request.user.size() <= 256);
  return 0;
}
