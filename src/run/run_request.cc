#include "run/run_request.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "util/relative_path.h"
#include "util/reserved_dirs.h"
#include "util/text.h"

namespace sandrun::run {

static_assert(kMaxInputNameBytes == util::kMaxPathNameBytes);

std::string CheckRelativePath(const std::string& path) {
  if (path.empty()) return "is empty";
  // The request's own bounds, tighter than the one rule set's (util/relative_path.h).
  if (path.size() > kMaxInputPathBytes) {
    return "is longer than " + std::to_string(kMaxInputPathBytes) + " bytes";
  }
  for (const unsigned char c : path) {
    if (c < 0x20 || c == 0x7f) return "contains a control character or NUL byte";
  }
  if (std::string why = util::RelativePathError(path); !why.empty()) return why;
  const std::string_view first = std::string_view(path).substr(0, path.find('/'));
  if (first == util::kProgramDir) return "'.sandrun/' is reserved";
  return "";
}

const char* RunStatusName(RunStatus status) {
  switch (status) {
    case RunStatus::kOk:
      return "ok";
    case RunStatus::kError:
      return "error";
    case RunStatus::kKilled:
      return "killed";
    case RunStatus::kTimeout:
      return "timeout";
    case RunStatus::kMemoryLimit:
      return "memory_limit";
    case RunStatus::kOutputLimit:
      return "output_limit";
    case RunStatus::kFileLimit:
      return "file_limit";
  }
  return "error";
}

std::string EncodePlanJson(const std::vector<PlanEntry>& plan) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  auto string = [&w](const std::string& raw) {
    const std::string clean = util::SanitizeUtf8(raw);
    w.String(clean.data(), static_cast<rapidjson::SizeType>(clean.size()));
  };
  w.StartArray();
  for (const auto& entry : plan) {
    w.StartObject();
    w.Key("index");
    w.Int(entry.index);
    w.Key("language");
    string(entry.language);
    w.Key("run");
    w.Bool(entry.run);
    w.Key("reason");
    string(entry.reason);
    w.EndObject();
  }
  w.EndArray();
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace sandrun::run
