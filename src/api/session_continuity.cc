#include "api/session_continuity.h"

namespace sandrun::api {

std::optional<ApiError> DecodeSessionSeen(const std::string& header, bool* seen) {
  if (header.empty() || header == "0") {
    *seen = false;
  } else if (header == "1") {
    *seen = true;
  } else {
    return MakeApiError(ApiCode::kWrongType, "the X-Sandrun-Session-Seen header must be 0 or 1",
                        "X-Sandrun-Session-Seen");
  }
  return std::nullopt;
}

}  // namespace sandrun::api
