#include "api/run_codec.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "util/text.h"

namespace sandrun::api {
namespace {

using rapidjson::Value;

ApiError Bad(const std::string& code, const std::string& message, const std::string& field) {
  return ApiError{400, code, message, field};
}

std::optional<ApiError> GetString(const Value& v, const char* field, std::string* out) {
  if (!v.IsString()) return Bad("wrong_type", std::string("'") + field + "' must be a string", field);
  out->assign(v.GetString(), v.GetStringLength());
  return std::nullopt;
}

std::optional<ApiError> DecodeLimits(const Value& v, const config::Config& config,
                                     config::Limits* limits) {
  if (!v.IsObject()) return Bad("wrong_type", "'limits' must be an object", "limits");
  for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
    std::string name(it->name.GetString(), it->name.GetStringLength());
    std::string field = "limits." + name;
    const config::LimitKey* key = nullptr;
    for (const auto& k : config::LimitKeys()) {
      if (name == k.name) key = &k;
    }
    if (key == nullptr) {
      std::string known;
      for (const auto& k : config::LimitKeys()) known += std::string(known.empty() ? "" : ", ") + k.name;
      return Bad("unknown_field", "unknown limit '" + util::SanitizeUtf8(name) + "' (known: " +
                                      known + ")", util::SanitizeUtf8(field));
    }
    if (!it->value.IsInt64()) {
      return Bad("wrong_type", "'" + field + "' must be an integer", field);
    }
    int64_t value = it->value.GetInt64();
    int64_t ceiling = config.ceilings.*(key->member);
    if (value < key->min) {
      return Bad("limit_below_minimum",
                 "'" + field + "' must be at least " + std::to_string(key->min), field);
    }
    if (value > ceiling) {
      return Bad("limit_above_ceiling", "'" + field + "' is " + std::to_string(value) +
                                            ", above the configured ceiling " +
                                            std::to_string(ceiling), field);
    }
    limits->*(key->member) = value;
  }
  return std::nullopt;
}

template <typename Writer>
void Key(Writer& w, const char* key) {
  w.Key(key);
}

template <typename Writer>
void String(Writer& w, const std::string& raw) {
  std::string clean = util::SanitizeUtf8(raw);
  w.String(clean.data(), static_cast<rapidjson::SizeType>(clean.size()));
}

}  // namespace

std::optional<ApiError> DecodeRunRequest(const std::string& body, const std::string& header_user,
                                         const config::Config& config, RunRequest* out) {
  rapidjson::Document doc;
  // kParseStopWhenDoneFlag off: trailing garbage is an error. Depth is bounded by RapidJSON's
  // iterative parser, so deep nesting cannot overflow the stack.
  doc.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag>(body.data(),
                                                                                   body.size());
  if (doc.HasParseError()) {
    return Bad("invalid_json", std::string("request body is not valid JSON: ") +
                                   rapidjson::GetParseError_En(doc.GetParseError()) +
                                   " (at byte offset " + std::to_string(doc.GetErrorOffset()) +
                                   ")", "");
  }
  if (!doc.IsObject()) return Bad("wrong_type", "request body must be a JSON object", "");
  out->limits = config.limits;
  std::string language;
  bool has_code = false, has_language = false, has_user = false;
  for (auto it = doc.MemberBegin(); it != doc.MemberEnd(); ++it) {
    std::string name(it->name.GetString(), it->name.GetStringLength());
    const Value& v = it->value;
    std::optional<ApiError> err;
    if (name == "language") {
      err = GetString(v, "language", &language);
      has_language = true;
    } else if (name == "code") {
      err = GetString(v, "code", &out->code);
      has_code = true;
    } else if (name == "stdin") {
      err = GetString(v, "stdin", &out->stdin_data);
    } else if (name == "user") {
      err = GetString(v, "user", &out->user);
      has_user = true;
    } else if (name == "limits") {
      err = DecodeLimits(v, config, &out->limits);
    } else if (name == "network") {
      if (!v.IsBool()) return Bad("wrong_type", "'network' must be true or false", "network");
      if (v.GetBool()) {
        return ApiError{403, "network_forbidden",
                        "network access is disabled on this server (the config grants none)",
                        "network"};
      }
    } else if (name == "snippets" || name == "markdown" || name == "block" || name == "files" ||
               name == "session" || name == "continue_on_error") {
      return Bad("not_supported", "'" + name + "' is part of the API but not supported by this "
                                  "server version yet; send 'language' and 'code'", name);
    } else {
      return Bad("unknown_field", "unknown field '" + util::SanitizeUtf8(name) + "'",
                 util::SanitizeUtf8(name));
    }
    if (err) return err;
  }
  if (!has_code) return Bad("missing_field", "'code' is required (with 'language')", "code");
  if (!has_language) return Bad("missing_field", "'language' is required with 'code'", "language");
  // No interpreter accepts a NUL byte in source (Python: "source code cannot contain null
  // bytes"; bash drops it silently, changing the program): refuse rather than run a mangled
  // program.
  if (size_t nul = out->code.find('\0'); nul != std::string::npos) {
    return Bad("invalid_code", "'code' contains a null byte (U+0000) at byte offset " +
                                   std::to_string(nul) +
                                   "; source code cannot contain null bytes", "code");
  }
  out->language = config::FindLanguage(config, language);
  if (out->language == nullptr) {
    std::string known;
    for (const auto& l : config.languages) known += std::string(known.empty() ? "" : ", ") + l.name;
    return Bad("unknown_language", "unknown language '" + util::SanitizeUtf8(language) +
                                       "' (configured: " + known + ")", "language");
  }
  if (!has_user && !header_user.empty()) out->user = header_user;
  if (out->user.empty() || out->user.size() > 256) {
    return Bad("wrong_type", "'user' must be 1 to 256 bytes", "user");
  }
  return std::nullopt;
}

std::string EncodeRunResponse(const RunResponse& r) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  Key(w, "id");
  String(w, r.id);
  Key(w, "status");
  String(w, r.status);
  Key(w, "exit_code");
  r.exit_code ? w.Int(*r.exit_code) : w.Null();
  Key(w, "signal");
  r.signal ? w.Int(*r.signal) : w.Null();
  Key(w, "stdout");
  String(w, r.stdout_stream.text);
  Key(w, "stderr");
  String(w, r.stderr_stream.text);
  Key(w, "stdout_truncated");
  w.Bool(r.stdout_stream.truncated);
  Key(w, "stderr_truncated");
  w.Bool(r.stderr_stream.truncated);
  Key(w, "files");
  w.StartArray();
  for (const auto& f : r.files) {
    w.StartObject();
    Key(w, "name");
    String(w, f.name);
    Key(w, "path");
    String(w, f.path);
    Key(w, "size");
    w.Uint64(f.size);
    Key(w, "mime");
    String(w, f.mime);
    Key(w, "sha256");
    String(w, f.sha256);
    Key(w, "url");
    String(w, f.url);
    Key(w, "expires_at");
    w.Int64(f.expires_at);
    w.EndObject();
  }
  w.EndArray();
  Key(w, "files_skipped");
  w.StartArray();
  for (const auto& s : r.files_skipped) {
    w.StartObject();
    Key(w, "path");
    String(w, s.path);
    Key(w, "reason");
    String(w, s.reason);
    w.EndObject();
  }
  w.EndArray();
  Key(w, "usage");
  w.StartObject();
  Key(w, "wall_ms");
  w.Int64(r.wall_ms);
  Key(w, "cpu_ms");
  w.Int64(r.cpu_ms);
  Key(w, "max_rss_kb");
  w.Int64(r.max_rss_kb);
  w.EndObject();
  Key(w, "limits");
  w.StartObject();
  for (const auto& k : config::LimitKeys()) {
    Key(w, k.name);
    w.Int64(r.limits.*(k.member));
  }
  w.EndObject();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace sandrun::api
