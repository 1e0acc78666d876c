#include "jupyter/messages.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cctype>
#include <chrono>
#include <ctime>

#include "util/text.h"

namespace sandrun::jupyter {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void Str(Writer& w, const std::string& s) { w.String(s.data(), static_cast<unsigned>(s.size())); }

bool BoolOr(const rapidjson::Value& c, const char* name, bool fallback) {
  auto it = c.FindMember(name);
  return it != c.MemberEnd() && it->value.IsBool() ? it->value.GetBool() : fallback;
}

// The header, msg_id and msg_type members of a message to the client.
void WriteHeader(Writer& w, const std::string& msg_type, const std::string& session) {
  // Clients treat msg_id as an opaque string.
  const std::string id = util::RandomHex(16);
  w.Key("header");
  w.StartObject();
  w.Key("msg_id");
  Str(w, id);
  w.Key("msg_type");
  Str(w, msg_type);
  w.Key("username");
  w.String("sandrun");
  w.Key("session");
  Str(w, session);
  w.Key("date");
  Str(w, IsoNow());
  w.Key("version");
  w.String("5.3");
  w.EndObject();
  w.Key("msg_id");
  Str(w, id);
  w.Key("msg_type");
  Str(w, msg_type);
}

std::string Finish(rapidjson::StringBuffer& b) { return std::string(b.GetString(), b.GetSize()); }

// `text` as a JSON string member: valid UTF-8 (RapidJSON's writer does not check it).
void Text(Writer& w, const char* key, const std::string& text) {
  w.Key(key);
  Str(w, util::SanitizeUtf8(text));
}

}  // namespace

std::string StatusContent(const std::string& state) {
  rapidjson::StringBuffer b;
  Writer w(b);
  w.StartObject();
  Text(w, "execution_state", state);
  w.EndObject();
  return Finish(b);
}

std::string StreamContent(const std::string& name, const std::string& text) {
  rapidjson::StringBuffer b;
  Writer w(b);
  w.StartObject();
  Text(w, "name", name);
  Text(w, "text", text);
  w.EndObject();
  return Finish(b);
}

std::string ErrorContent(const std::string& ename, const std::string& evalue,
                         const std::string& traceback_line) {
  rapidjson::StringBuffer b;
  Writer w(b);
  w.StartObject();
  Text(w, "ename", ename);
  Text(w, "evalue", evalue);
  w.Key("traceback");
  w.StartArray();
  Str(w, util::SanitizeUtf8(traceback_line));
  w.EndArray();
  w.EndObject();
  return Finish(b);
}

std::string ErrorReplyContent(int execution_count, const std::string& ename,
                              const std::string& evalue) {
  rapidjson::StringBuffer b;
  Writer w(b);
  w.StartObject();
  Text(w, "status", "error");
  w.Key("execution_count");
  w.Int(execution_count);
  Text(w, "ename", ename);
  Text(w, "evalue", evalue);
  w.Key("traceback");
  w.StartArray();
  w.EndArray();
  w.EndObject();
  return Finish(b);
}

std::string IsoNow() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
      1000000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[48];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%06lldZ", static_cast<long long>(micros));
  return buf;
}

Result<ClientMessage> ParseClientMessage(const std::string& text) {
  ClientMessage m;
  m.doc.Parse(text.data(), text.size());
  if (m.doc.HasParseError() || !m.doc.IsObject()) {
    return MakeError(ErrorKind::kInvalidInput, "a message is a JSON object");
  }
  auto header = m.doc.FindMember("header");
  if (header == m.doc.MemberEnd() || !header->value.IsObject()) {
    return MakeError(ErrorKind::kInvalidInput, "the message has no header object");
  }
  auto type = header->value.FindMember("msg_type");
  auto id = header->value.FindMember("msg_id");
  if (type == header->value.MemberEnd() || !type->value.IsString() ||
      id == header->value.MemberEnd() || !id->value.IsString()) {
    return MakeError(ErrorKind::kInvalidInput, "header.msg_type and header.msg_id are strings");
  }
  m.msg_type = type->value.GetString();
  auto channel = m.doc.FindMember("channel");
  m.channel = channel != m.doc.MemberEnd() && channel->value.IsString() ? channel->value.GetString()
                                                                        : "shell";
  auto content = m.doc.FindMember("content");
  if (content == m.doc.MemberEnd()) {
    m.doc.AddMember("content", rapidjson::Value(rapidjson::kObjectType), m.doc.GetAllocator());
  } else if (!content->value.IsObject()) {
    return MakeError(ErrorKind::kInvalidInput, "content is a JSON object");
  }
  return m;
}

std::string MessageToClient(const std::string& channel, const std::string& msg_type,
                            const rapidjson::Value& parent_header, const rapidjson::Value& content,
                            const std::string& session) {
  rapidjson::StringBuffer b;
  Writer w(b);
  w.StartObject();
  WriteHeader(w, msg_type, session);
  w.Key("parent_header");
  parent_header.Accept(w);
  w.Key("metadata");
  w.StartObject();
  w.EndObject();
  w.Key("content");
  content.Accept(w);
  w.Key("buffers");
  w.StartArray();
  w.EndArray();
  w.Key("channel");
  Str(w, channel);
  w.EndObject();
  return Finish(b);
}

std::string MessageToClient(const std::string& channel, const std::string& msg_type,
                            const rapidjson::Value& parent_header, const std::string& content_json,
                            const std::string& session) {
  rapidjson::Document content;
  content.Parse(content_json.data(), content_json.size());
  if (content.HasParseError() || !content.IsObject()) content.SetObject();
  return MessageToClient(channel, msg_type, parent_header, content, session);
}

bool StopOnError(const rapidjson::Value& c) { return BoolOr(c, "stop_on_error", true); }

std::string AbortedReplyContent() { return R"({"status":"aborted","execution_count":null})"; }

Result<std::string> KernelExecuteContent(const rapidjson::Value& c) {
  auto code = c.FindMember("code");
  if (code == c.MemberEnd() || !code->value.IsString()) {
    return MakeError(ErrorKind::kInvalidInput, "execute_request: content.code is a string");
  }
  rapidjson::StringBuffer b;
  Writer w(b);
  w.StartObject();
  w.Key("code");
  w.String(code->value.GetString(), code->value.GetStringLength());
  w.Key("silent");
  w.Bool(BoolOr(c, "silent", false));
  w.Key("store_history");
  w.Bool(BoolOr(c, "store_history", true));
  w.Key("user_expressions");
  auto expressions = c.FindMember("user_expressions");
  if (expressions != c.MemberEnd() && expressions->value.IsObject()) {
    expressions->value.Accept(w);
  } else {
    w.StartObject();
    w.EndObject();
  }
  w.Key("allow_stdin");
  w.Bool(BoolOr(c, "allow_stdin", false));
  // The server aborts the queued executes after a failed one (StopOnError); a frozen
  // kernel would abort the next request itself, whenever it came.
  w.Key("stop_on_error");
  w.Bool(false);
  // Tells sandrun's kernel set-up (sandrun_kernel.py) to leave input() to ipykernel: the
  // client answers it, or it raises StdinNotImplementedError (ipykernel ignores the member).
  w.Key("sandrun_stdin");
  w.String("client");
  w.EndObject();
  return Finish(b);
}

std::string InputReplyContent(const rapidjson::Value& c) {
  auto value = c.FindMember("value");
  rapidjson::StringBuffer b;
  Writer w(b);
  w.StartObject();
  Text(w, "value",
       value != c.MemberEnd() && value->value.IsString()
           ? std::string(value->value.GetString(), value->value.GetStringLength())
           : std::string());
  w.EndObject();
  return Finish(b);
}

namespace {

// A path on one line: control characters as '?', valid UTF-8.
std::string OneLine(const std::string& path) {
  std::string out = util::SanitizeUtf8(path);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return out;
}

std::string HtmlEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Text as Markdown shows it literally (every ASCII punctuation escaped).
std::string MarkdownEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::ispunct(static_cast<unsigned char>(c))) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string FilesDisplayContent(const std::vector<FileLink>& files,
                                const std::vector<SkippedLink>& skipped) {
  std::string plain, markdown, html = "<ul>\n";
  for (const auto& f : files) {
    const std::string name = OneLine(f.path);
    plain += name + ": " + f.url + "\n";
    markdown += "- [" + MarkdownEscape(name) + "](<" + f.url + ">) (" + std::to_string(f.size) +
                " bytes)\n";
    html += "<li><a href=\"" + HtmlEscape(f.url) + "\" target=\"_blank\">" + HtmlEscape(name) +
            "</a> (" + std::to_string(f.size) + " bytes)</li>\n";
  }
  for (size_t i = 0; i < skipped.size() && i < kMaxSkippedShown; ++i) {
    const std::string name = OneLine(skipped[i].path);
    const std::string why = OneLine(skipped[i].reason);
    plain += name + ": skipped (" + why + ")\n";
    markdown += "- " + MarkdownEscape(name) + ": skipped (" + MarkdownEscape(why) + ")\n";
    html += "<li>" + HtmlEscape(name) + ": skipped (" + HtmlEscape(why) + ")</li>\n";
  }
  if (skipped.size() > kMaxSkippedShown) {
    const std::string more =
        std::to_string(skipped.size() - kMaxSkippedShown) + " more files skipped";
    plain += more + "\n";
    markdown += "- " + more + "\n";
    html += "<li>" + more + "</li>\n";
  }
  html += "</ul>\n";
  rapidjson::StringBuffer b;
  Writer w(b);
  w.StartObject();
  w.Key("data");
  w.StartObject();
  Text(w, "text/plain", plain);
  Text(w, "text/markdown", markdown);
  Text(w, "text/html", html);
  w.EndObject();
  w.Key("metadata");
  w.StartObject();
  w.EndObject();
  w.Key("transient");
  w.StartObject();
  w.EndObject();
  w.EndObject();
  return Finish(b);
}

std::string KernelInfoReplyContent() {
  return R"({"status":"ok","protocol_version":"5.3","implementation":"ipython",)"
         R"("implementation_version":"","language_info":{"name":"python","version":"3",)"
         R"("mimetype":"text/x-python","file_extension":".py","pygments_lexer":"ipython3",)"
         R"("codemirror_mode":{"name":"ipython","version":3},"nbconvert_exporter":"python"},)"
         R"("banner":"IPython in a sandrun sandbox","help_links":[]})";
}

std::string KernelSpecJson() {
  return R"j({"name":"python3","spec":{"argv":[],"display_name":"Python 3 (sandboxed)",)j"
         R"("language":"python","interrupt_mode":"message","env":{},"metadata":{}},)"
         R"("resources":{}})";
}

std::string KernelSpecsJson() {
  return R"({"default":"python3","kernelspecs":{"python3":)" + KernelSpecJson() + "}}";
}

namespace {
void WriteModel(Writer& w, const KernelModel& k) {
  w.StartObject();
  w.Key("id");
  Str(w, k.id);
  w.Key("name");
  w.String(kKernelName);
  w.Key("last_activity");
  Str(w, k.last_activity);
  w.Key("execution_state");
  Str(w, k.execution_state);
  w.Key("connections");
  w.Int(k.connections);
  w.EndObject();
}
}  // namespace

std::string KernelModelJson(const KernelModel& k) {
  rapidjson::StringBuffer b;
  Writer w(b);
  WriteModel(w, k);
  return Finish(b);
}

std::string KernelListJson(const std::vector<KernelModel>& kernels) {
  rapidjson::StringBuffer b;
  Writer w(b);
  w.StartArray();
  for (const auto& k : kernels) WriteModel(w, k);
  w.EndArray();
  return Finish(b);
}

std::string ErrorJson(const std::string& message, const std::string& reason) {
  rapidjson::StringBuffer b;
  Writer w(b);
  w.StartObject();
  w.Key("message");
  Str(w, util::SanitizeUtf8(message));
  w.Key("reason");
  Str(w, reason);
  w.EndObject();
  return Finish(b);
}

std::string PercentDecode(const std::string& text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && hex(text[i + 1]) >= 0 && hex(text[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex(text[i + 1]) * 16 + hex(text[i + 2])));
      i += 2;
    } else if (plus_is_space && text[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

std::map<std::string, std::string> ParseForm(const std::string& text) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('&', start);
    if (end == std::string::npos) end = text.size();
    const std::string pair = text.substr(start, end - start);
    const size_t eq = pair.find('=');
    if (!pair.empty()) {
      out.emplace(PercentDecode(pair.substr(0, eq), true),
                  eq == std::string::npos ? "" : PercentDecode(pair.substr(eq + 1), true));
    }
    start = end + 1;
  }
  return out;
}

std::map<std::string, std::string> ParseCookies(const std::string& header) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start < header.size()) {
    size_t end = header.find(';', start);
    if (end == std::string::npos) end = header.size();
    std::string pair = header.substr(start, end - start);
    const size_t a = pair.find_first_not_of(' ');
    pair = a == std::string::npos ? "" : pair.substr(a);
    const size_t eq = pair.find('=');
    if (eq != std::string::npos && eq > 0) out.emplace(pair.substr(0, eq), pair.substr(eq + 1));
    start = end + 1;
  }
  return out;
}

}  // namespace sandrun::jupyter
