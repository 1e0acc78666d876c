#include "api/run_codec.h"

#include <rapidjson/document.h>
#include <rapidjson/encodedstream.h>
#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cctype>
#include <set>

#include "run/requirements.h"
#include "util/base64.h"
#include "util/relative_path.h"
#include "util/reserved_dirs.h"
#include "util/text.h"

namespace sandrun::api {

// The `packages` grammar is the engine's (run/requirements.h).
using run::kMaxPackages;
using run::NormalizeSet;
using run::ParseRequirement;
using run::Requirement;

namespace {

using rapidjson::Value;

ApiError Bad(ApiCode code, const std::string& message, const std::string& field) {
  return MakeApiError(code, message, field);
}

std::optional<ApiError> GetString(const Value& v, const char* field, std::string* out) {
  if (!v.IsString())
    return Bad(ApiCode::kWrongType, std::string("'") + field + "' must be a string", field);
  out->assign(v.GetString(), v.GetStringLength());
  return std::nullopt;
}

// A request's "limits": config::DecodeLimits against the configured ceilings, its problems
// worded as API errors.
std::optional<ApiError> DecodeLimits(const Value& v, const config::Config& config,
                                     config::Limits* limits) {
  std::optional<config::LimitError> error = config::DecodeLimits(v, &config.ceilings, limits);
  if (!error) return std::nullopt;
  const std::string field = "limits." + error->name;
  switch (error->kind) {
    case config::LimitError::Kind::kNotObject:
      return Bad(ApiCode::kWrongType, "'limits' must be an object", "limits");
    case config::LimitError::Kind::kUnknown: {
      std::string known;
      for (const auto& k : config::LimitKeys())
        known += std::string(known.empty() ? "" : ", ") + k.name;
      return Bad(ApiCode::kUnknownField,
                 "unknown limit '" + util::SanitizeUtf8(error->name) + "' (known: " + known + ")",
                 util::SanitizeUtf8(field));
    }
    case config::LimitError::Kind::kNotInteger:
      return Bad(ApiCode::kWrongType, "'" + field + "' must be an integer", field);
    case config::LimitError::Kind::kBelowMinimum:
      return Bad(ApiCode::kLimitBelowMinimum,
                 "'" + field + "' must be at least " + std::to_string(error->key->min), field);
    case config::LimitError::Kind::kAboveCeiling:
      return Bad(ApiCode::kLimitAboveCeiling,
                 "'" + field + "' is " + std::to_string(error->value) +
                     ", above the configured ceiling " + std::to_string(error->ceiling),
                 field);
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

// The fields a run and each of its steps share: status, exit code, signal, both streams.
template <typename Writer>
void Outcome(Writer& w, RunStatus status, const std::optional<int>& exit_code,
             const std::optional<int>& signal, const StreamResult& out, const StreamResult& err) {
  Key(w, "status");
  w.String(RunStatusName(status));
  Key(w, "exit_code");
  exit_code ? w.Int(*exit_code) : w.Null();
  Key(w, "signal");
  signal ? w.Int(*signal) : w.Null();
  Key(w, "stdout");
  String(w, out.text);
  Key(w, "stderr");
  String(w, err.text);
  Key(w, "stdout_truncated");
  w.Bool(out.truncated);
  Key(w, "stderr_truncated");
  w.Bool(err.truncated);
}

}  // namespace

namespace {

std::optional<ApiError> CheckCode(const std::string& code, const std::string& field) {
  // No interpreter accepts a NUL byte in source (Python: "source code cannot contain null
  // bytes"; bash drops it silently, changing the program): refuse rather than run a mangled
  // program.
  if (size_t nul = code.find('\0'); nul != std::string::npos) {
    return Bad(ApiCode::kInvalidCode,
               "'" + field + "' contains a null byte (U+0000) at byte offset " +
                   std::to_string(nul) + "; source code cannot contain null bytes",
               field);
  }
  return std::nullopt;
}

std::optional<ApiError> FindLanguage(const config::Config& config, const std::string& name,
                                     const std::string& field, const config::Language** out) {
  *out = config::FindLanguage(config, name);
  if (*out != nullptr) return std::nullopt;
  std::string known;
  for (const auto& l : config.languages) known += std::string(known.empty() ? "" : ", ") + l.name;
  return Bad(ApiCode::kUnknownLanguage,
             "unknown language '" + util::SanitizeUtf8(name) + "' (configured: " + known + ")",
             field);
}

std::optional<ApiError> DecodeSnippets(const Value& v, const config::Config& config,
                                       std::vector<CodeStep>* steps) {
  if (!v.IsArray() || v.Empty()) {
    return Bad(ApiCode::kWrongType, "'snippets' must be a non-empty array of {language, code}",
               "snippets");
  }
  if (v.Size() > 64) return Bad(ApiCode::kTooLarge, "at most 64 snippets per request", "snippets");
  for (rapidjson::SizeType i = 0; i < v.Size(); ++i) {
    const std::string field = "snippets[" + std::to_string(i) + "]";
    const Value& s = v[i];
    if (!s.IsObject()) return Bad(ApiCode::kWrongType, "'" + field + "' must be an object", field);
    CodeStep step;
    std::string language;
    for (auto it = s.MemberBegin(); it != s.MemberEnd(); ++it) {
      std::string name(it->name.GetString(), it->name.GetStringLength());
      std::optional<ApiError> err;
      if (name == "language") {
        err = GetString(it->value, (field + ".language").c_str(), &language);
      } else if (name == "code") {
        err = GetString(it->value, (field + ".code").c_str(), &step.code);
      } else {
        return Bad(ApiCode::kUnknownField,
                   "unknown field '" + util::SanitizeUtf8(name) + "' in " + field,
                   field + "." + util::SanitizeUtf8(name));
      }
      if (err) return err;
    }
    if (language.empty())
      return Bad(ApiCode::kMissingField, "'" + field + ".language' is required",
                 field + ".language");
    if (!s.HasMember("code"))
      return Bad(ApiCode::kMissingField, "'" + field + ".code' is required", field + ".code");
    if (auto err = FindLanguage(config, language, field + ".language", &step.language)) return err;
    if (auto err = CheckCode(step.code, field + ".code")) return err;
    step.title = "snippet " + std::to_string(i + 1) + " (" + step.language->name + ")";
    steps->push_back(std::move(step));
  }
  return std::nullopt;
}

std::optional<ApiError> DecodeFiles(const Value& v, const config::Limits& limits,
                                    std::vector<InputFile>* files) {
  if (!v.IsArray())
    return Bad(ApiCode::kWrongType, "'files' must be an array of {path, content_base64}", "files");
  if (v.Size() > kMaxInputFiles) {
    return Bad(ApiCode::kTooLarge, "at most " + std::to_string(kMaxInputFiles) + " input files",
               "files");
  }
  for (rapidjson::SizeType i = 0; i < v.Size(); ++i) {
    const std::string field = "files[" + std::to_string(i) + "]";
    const Value& f = v[i];
    if (!f.IsObject() || !f.HasMember("path") || !f["path"].IsString() ||
        !f.HasMember("content_base64") || !f["content_base64"].IsString() || f.MemberCount() != 2) {
      return Bad(ApiCode::kWrongType,
                 "'" + field + "' must be {\"path\": string, \"content_base64\": string}", field);
    }
    InputFile file;
    file.path.assign(f["path"].GetString(), f["path"].GetStringLength());
    if (std::string why = CheckRelativePath(file.path); !why.empty()) {
      return Bad(ApiCode::kInvalidPath, "'" + field + ".path' " + why, field + ".path");
    }
    for (const auto& earlier : *files) {
      if (earlier.path == file.path)
        return Bad(ApiCode::kInvalidPath, "'" + field + ".path' repeats an earlier path",
                   field + ".path");
    }
    auto content = util::DecodeBase64(
        std::string_view(f["content_base64"].GetString(), f["content_base64"].GetStringLength()));
    if (!content) {
      return Bad(ApiCode::kInvalidBase64,
                 "'" + field + ".content_base64' is not valid base64 (RFC 4648)",
                 field + ".content_base64");
    }
    if (content->size() >= static_cast<uint64_t>(limits.file_size_mb) << 20) {
      return Bad(ApiCode::kTooLarge, "'" + field + "' is larger than file_size_mb", field);
    }
    file.content = std::move(*content);
    files->push_back(std::move(file));
  }
  return std::nullopt;
}

// Forwards the reader's events to a document, stopping the parse at once when the nesting
// gets deeper than kMaxJsonDepth or the values more than kMaxJsonValues: the limit holds
// while parsing, before the document has grown (RapidJSON's reader stops with
// kParseErrorTermination when a handler returns false).
class BoundedHandler {
 public:
  using Ch = char;
  explicit BoundedHandler(rapidjson::Document* doc) : doc_(doc) {}
  const char* exceeded() const { return exceeded_; }

  bool Null() { return Count() && doc_->Null(); }
  bool Bool(bool b) { return Count() && doc_->Bool(b); }
  bool Int(int i) { return Count() && doc_->Int(i); }
  bool Uint(unsigned u) { return Count() && doc_->Uint(u); }
  bool Int64(int64_t i) { return Count() && doc_->Int64(i); }
  bool Uint64(uint64_t u) { return Count() && doc_->Uint64(u); }
  bool Double(double d) { return Count() && doc_->Double(d); }
  bool RawNumber(const Ch* s, rapidjson::SizeType n, bool copy) {
    return Count() && doc_->RawNumber(s, n, copy);
  }
  bool String(const Ch* s, rapidjson::SizeType n, bool copy) {
    return Count() && doc_->String(s, n, copy);
  }
  bool Key(const Ch* s, rapidjson::SizeType n, bool copy) { return doc_->Key(s, n, copy); }
  bool StartObject() { return Count() && Enter() && doc_->StartObject(); }
  bool EndObject(rapidjson::SizeType n) { return --depth_, doc_->EndObject(n); }
  bool StartArray() { return Count() && Enter() && doc_->StartArray(); }
  bool EndArray(rapidjson::SizeType n) { return --depth_, doc_->EndArray(n); }

 private:
  bool Count() {
    if (++values_ <= kMaxJsonValues) return true;
    exceeded_ = "more than 10000 values";
    return false;
  }
  bool Enter() {
    if (++depth_ <= kMaxJsonDepth) return true;
    exceeded_ = "nested deeper than 32 levels";
    return false;
  }
  rapidjson::Document* doc_;
  int depth_ = 0;
  size_t values_ = 0;
  const char* exceeded_ = nullptr;
};

// Parses `body` into `doc` within the bounds above. kParseStopWhenDoneFlag off: trailing
// garbage is an error. The iterative parser keeps nesting off the C++ stack.
std::optional<ApiError> ParseBounded(const std::string& body, rapidjson::Document* doc) {
  static_assert(kMaxJsonDepth == 32 && kMaxJsonValues == 10000, "update the messages");
  rapidjson::Reader reader;
  BoundedHandler handler(doc);
  auto parse = [&](rapidjson::Document& target) {
    (void)target;  // the handler forwards to it
    rapidjson::MemoryStream bytes(body.data(), body.size());
    rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> stream(bytes);
    return !reader
                .Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag>(
                    stream, handler)
                .IsError();
  };
  doc->Populate(parse);
  if (!reader.HasParseError()) return std::nullopt;
  const std::string why = handler.exceeded() != nullptr
                              ? std::string(handler.exceeded())
                              : rapidjson::GetParseError_En(reader.GetParseErrorCode());
  return Bad(ApiCode::kInvalidJson,
             "request body is not valid JSON: " + why + " (at byte offset " +
                 std::to_string(reader.GetErrorOffset()) + ")",
             "");
}

template <typename Writer>
void File(Writer& w, const storage::ArtifactFile& f) {
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

// `packages`: an array of at most kMaxPackages requirement strings (run/requirements.h).
std::optional<ApiError> DecodePackages(const Value& v, std::vector<std::string>* out) {
  if (!v.IsArray())
    return Bad(ApiCode::kWrongType, "'packages' must be an array of strings", "packages");
  if (v.Size() > kMaxPackages) {
    return Bad(ApiCode::kInvalidPackage,
               "'packages' has " + std::to_string(v.Size()) + " entries; at most " +
                   std::to_string(kMaxPackages) + " are allowed",
               "packages");
  }
  std::vector<Requirement> parsed;
  for (const auto& item : v.GetArray()) {
    if (!item.IsString()) {
      return Bad(ApiCode::kWrongType, "'packages' must be an array of strings", "packages");
    }
    const std::string text(item.GetString(), item.GetStringLength());
    Requirement r;
    if (std::string why = ParseRequirement(text, &r); !why.empty()) {
      std::string shown = util::SanitizeUtf8(text.substr(0, 80));
      for (char& c : shown) {
        if (static_cast<unsigned char>(c) < 0x20) c = '?';
      }
      return Bad(ApiCode::kInvalidPackage,
                 "package '" + shown + (text.size() > 80 ? "...'" : "'") + " " + why, "packages");
    }
    parsed.push_back(std::move(r));
  }
  *out = NormalizeSet(parsed);
  return std::nullopt;
}

}  // namespace

namespace {

// What the top-level members said about where the code comes from, checked once all are read.
struct Sources {
  std::string language, code, markdown;
  bool has_code = false, has_language = false, has_user = false, has_session = false;
  bool has_snippets = false, has_markdown = false, has_block = false;
};

std::optional<ApiError> DecodeBool(const Value& v, const std::string& name, bool* out) {
  if (!v.IsBool()) return Bad(ApiCode::kWrongType, "'" + name + "' must be true or false", name);
  *out = v.GetBool();
  return std::nullopt;
}

std::optional<ApiError> DecodeNetwork(const Value& v, const config::Config& config, bool* out) {
  if (!v.IsBool()) return Bad(ApiCode::kWrongType, "'network' must be true or false", "network");
  if (v.GetBool() && config.network == "off") {
    return MakeApiError(ApiCode::kNetworkForbidden,
                        "network access is disabled on this server (config \"network\" is "
                        "\"off\")",
                        "network");
  }
  *out = v.GetBool() || config.network == "always";
  return std::nullopt;
}

// One top-level member other than "limits" (decoded first, as input files are checked
// against them).
std::optional<ApiError> DecodeMember(const std::string& name, const Value& v,
                                     const config::Config& config, Sources* src, RunRequest* out) {
  if (name == "language") {
    src->has_language = true;
    return GetString(v, "language", &src->language);
  }
  if (name == "code") {
    src->has_code = true;
    return GetString(v, "code", &src->code);
  }
  if (name == "stdin") return GetString(v, "stdin", &out->stdin_data);
  if (name == "user") {
    src->has_user = true;
    return GetString(v, "user", &out->user);
  }
  if (name == "session") {
    src->has_session = true;
    return GetString(v, "session", &out->session);
  }
  if (name == "snippets") {
    src->has_snippets = true;
    return DecodeSnippets(v, config, &out->steps);
  }
  if (name == "markdown") {
    src->has_markdown = true;
    return GetString(v, "markdown", &src->markdown);
  }
  if (name == "block") {
    if (!v.IsInt() || v.GetInt() < 0)
      return Bad(ApiCode::kWrongType, "'block' must be an integer >= 0", "block");
    out->block = v.GetInt();
    src->has_block = true;
    return std::nullopt;
  }
  if (name == "continue_on_error") return DecodeBool(v, name, &out->continue_on_error);
  if (name == "stateful") return DecodeBool(v, name, &out->stateful);
  if (name == "notebook") {
    bool on = false;
    if (auto err = DecodeBool(v, name, &on)) return err;
    out->notebook = on;
    return std::nullopt;
  }
  if (name == "files") return DecodeFiles(v, out->limits, &out->files);
  if (name == "packages") return DecodePackages(v, &out->packages);
  if (name == "network") return DecodeNetwork(v, config, &out->network);
  return Bad(ApiCode::kUnknownField, "unknown field '" + util::SanitizeUtf8(name) + "'",
             util::SanitizeUtf8(name));
}

// Every member of the body object, in order, each name at most once.
std::optional<ApiError> DecodeMembers(const Value& root, const config::Config& config, Sources* src,
                                      RunRequest* out) {
  std::set<std::string> seen;
  // Iterated as const: RapidJSON 1.1's non-const member iterators compare ambiguously under
  // C++20's reversed operators (clang -Wambiguous-reversed-operator).
  for (auto it = root.MemberBegin(); it != root.MemberEnd(); ++it) {
    std::string name(it->name.GetString(), it->name.GetStringLength());
    // RFC 8259 §4 leaves duplicate names to the parser; RapidJSON keeps both. Refuse rather
    // than guess which `code` the client meant.
    if (!seen.insert(name).second) {
      return Bad(ApiCode::kDuplicateField, "field '" + util::SanitizeUtf8(name) + "' appears twice",
                 util::SanitizeUtf8(name));
    }
    if (name == "limits") continue;  // decoded first
    if (auto err = DecodeMember(name, it->value, config, src, out)) return err;
  }
  return std::nullopt;
}

// Exactly one of code (with language), snippets and markdown; block only with markdown.
std::optional<ApiError> ApplySources(const config::Config& config, Sources* src, RunRequest* out) {
  const int sources =
      (src->has_code ? 1 : 0) + (src->has_snippets ? 1 : 0) + (src->has_markdown ? 1 : 0);
  if (sources == 0) {
    return Bad(ApiCode::kMissingField,
               "one of 'code' (with 'language'), 'snippets' or 'markdown' is required", "code");
  }
  if (sources > 1) {
    return Bad(ApiCode::kConflictingFields, "send exactly one of 'code', 'snippets' and 'markdown'",
               src->has_markdown ? "markdown" : "snippets");
  }
  if (src->has_block && !src->has_markdown)
    return Bad(ApiCode::kConflictingFields, "'block' goes with 'markdown'", "block");
  if (src->has_language && !src->has_code)
    return Bad(ApiCode::kConflictingFields, "'language' goes with 'code'", "language");
  if (src->has_code) {
    if (!src->has_language)
      return Bad(ApiCode::kMissingField, "'language' is required with 'code'", "language");
    CodeStep step;
    if (auto err = FindLanguage(config, src->language, "language", &step.language)) return err;
    if (auto err = CheckCode(src->code, "code")) return err;
    step.code = std::move(src->code);
    out->steps.push_back(std::move(step));
  }
  if (src->has_markdown) out->markdown = std::move(src->markdown);
  return std::nullopt;
}

// The user and session, from the body or the headers, and what a stateful run needs.
std::optional<ApiError> ApplyIdentity(const Sources& src, const std::string& header_user,
                                      const std::string& header_session, RunRequest* out) {
  // The body and a header naming different users or sessions: refused, not resolved silently
  // (a front end's header would lose to whatever the body says).
  if (src.has_user && !header_user.empty() && header_user != out->user) {
    return Bad(ApiCode::kConflictingFields,
               "the body's 'user' and the X-Sandrun-User header name different users", "user");
  }
  if (src.has_session && !header_session.empty() && header_session != out->session) {
    return Bad(ApiCode::kConflictingFields,
               "the body's 'session' and the X-Sandrun-Session header name different sessions",
               "session");
  }
  out->user_named = src.has_user || !header_user.empty();
  if (!src.has_user && !header_user.empty()) out->user = header_user;
  if (out->user.empty() || out->user.size() > 256) {
    return Bad(ApiCode::kWrongType, "'user' must be 1 to 256 bytes", "user");
  }
  if (!src.has_session && !header_session.empty()) out->session = header_session;
  if (out->session.size() > 256)
    return Bad(ApiCode::kWrongType, "'session' must be at most 256 bytes", "session");
  if (out->stateful && out->session.empty()) {
    return Bad(ApiCode::kMissingSession,
               "'stateful': true needs a 'session' (or X-Sandrun-Session): the kernel that keeps "
               "the variables is the session's",
               "stateful");
  }
  return std::nullopt;
}

}  // namespace

Result<RunRequest, ApiError> DecodeRunRequest(const std::string& body,
                                              const std::string& header_user,
                                              const std::string& header_session,
                                              const config::Config& config) {
  rapidjson::Document doc;
  if (auto err = ParseBounded(body, &doc)) return *err;
  if (!doc.IsObject()) return Bad(ApiCode::kWrongType, "request body must be a JSON object", "");
  RunRequest out;
  out.limits = config.limits;
  out.network = config.network == "always";
  // Limits first: input files are checked against them.
  if (doc.HasMember("limits")) {
    if (auto err = DecodeLimits(doc["limits"], config, &out.limits)) return *err;
  }
  Sources src;
  const Value& root = doc;
  if (auto err = DecodeMembers(root, config, &src, &out)) return *err;
  if (auto err = ApplySources(config, &src, &out)) return *err;
  if (auto err = ApplyIdentity(src, header_user, header_session, &out)) return *err;
  return out;
}

namespace {

template <typename Writer>
void EncodeDisplays(Writer& w, const std::vector<Display>& displays) {
  Key(w, "displays");
  w.StartArray();
  for (const auto& d : displays) {
    w.StartObject();
    Key(w, "kind");
    String(w, d.kind);
    Key(w, "mime");
    String(w, d.mime);
    if (d.text) {
      Key(w, "text");
      String(w, *d.text);
    }
    if (d.file) {
      Key(w, "file");
      File(w, *d.file);
    }
    w.EndObject();
  }
  w.EndArray();
}

// "files" and "files_skipped".
template <typename Writer>
void EncodeFiles(Writer& w, const RunResponse& r) {
  Key(w, "files");
  w.StartArray();
  for (const auto& f : r.files) File(w, f);
  w.EndArray();
  EncodeDisplays(w, r.displays);
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
}

template <typename Writer>
void EncodeUsage(Writer& w, const RunResponse& r) {
  Key(w, "usage");
  w.StartObject();
  Key(w, "wall_ms");
  w.Int64(r.wall_ms);
  Key(w, "cpu_ms");
  w.Int64(r.cpu_ms);
  Key(w, "max_rss_kb");
  w.Int64(r.max_rss_kb);
  if (r.net_rx_bytes) {
    Key(w, "net_rx_bytes");
    w.Int64(*r.net_rx_bytes);
  }
  if (r.net_tx_bytes) {
    Key(w, "net_tx_bytes");
    w.Int64(*r.net_tx_bytes);
  }
  w.EndObject();
}

// "snippets": one object per step that ran.
template <typename Writer>
void EncodeSteps(Writer& w, const std::vector<StepResult>& steps) {
  Key(w, "snippets");
  w.StartArray();
  for (const auto& step : steps) {
    w.StartObject();
    Key(w, "index");
    w.Int(step.index);
    Key(w, "language");
    String(w, step.language);
    Key(w, "code");
    String(w, step.code);
    Outcome(w, step.status, step.exit_code, step.signal, step.stdout_stream, step.stderr_stream);
    Key(w, "wall_ms");
    w.Int64(step.wall_ms);
    if (!step.budget.empty()) {
      Key(w, "budget");
      String(w, step.budget);
    }
    w.EndObject();
  }
  w.EndArray();
}

template <typename Writer>
void EncodeEnvironment(Writer& w, const EnvironmentReport& environment) {
  Key(w, "environment");
  w.StartObject();
  Key(w, "id");
  String(w, environment.id);
  Key(w, "packages");
  w.StartArray();
  for (const auto& p : environment.packages) String(w, p);
  w.EndArray();
  Key(w, "status");
  String(w, environment.status);
  Key(w, "build_ms");
  w.Int64(environment.build_ms);
  w.EndObject();
}

// The plan as run::EncodePlanJson writes it (the plan event of a streamed run writes the same).
template <typename Writer>
void EncodePlan(Writer& w, const std::vector<PlanEntry>& plan) {
  Key(w, "plan");
  const std::string json = run::EncodePlanJson(plan);
  w.RawValue(json.data(), json.size(), rapidjson::kArrayType);
}

template <typename Writer>
void EncodeKernel(Writer& w, const KernelInfo& kernel) {
  Key(w, "kernel");
  w.StartObject();
  Key(w, "status");
  String(w, kernel.status);
  Key(w, "execution_count");
  w.Int(kernel.execution_count);
  Key(w, "ended");
  w.Bool(kernel.ended);
  w.EndObject();
}

template <typename Writer>
void EncodeLimits(Writer& w, const config::Limits& limits) {
  Key(w, "limits");
  w.StartObject();
  for (const auto& k : config::LimitKeys()) {
    Key(w, k.name);
    w.Int64(limits.*(k.member));
  }
  w.EndObject();
}

}  // namespace

// The member order is part of what clients see; keep it.
std::string EncodeRunResponse(const RunResponse& r) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  Key(w, "id");
  String(w, r.id);
  Outcome(w, r.status, r.exit_code, r.signal, r.stdout_stream, r.stderr_stream);
  EncodeFiles(w, r);
  EncodeUsage(w, r);
  if (r.steps) EncodeSteps(w, *r.steps);
  if (r.environment) EncodeEnvironment(w, *r.environment);
  if (r.plan) EncodePlan(w, *r.plan);
  if (r.kernel) EncodeKernel(w, *r.kernel);
  if (r.session_restarted) {
    Key(w, "session_restarted");
    w.Bool(*r.session_restarted);
  }
  EncodeLimits(w, r.limits);
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace sandrun::api
