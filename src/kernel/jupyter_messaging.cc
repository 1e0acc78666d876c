#include "kernel/jupyter_messaging.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cctype>

namespace sandrun::kernel {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void String(Writer& w, const std::string& s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

Error Protocol(const std::string& what) { return MakeError(ErrorKind::kProtocol, what); }

// Parses one frame as a JSON object.
Result<rapidjson::Document> ParseObject(const std::string& frame, const char* name) {
  rapidjson::Document doc;
  doc.Parse(frame.data(), frame.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    return Protocol(std::string("the message's ") + name + " is not a JSON object");
  }
  return doc;
}

std::string StringMember(const rapidjson::Value& object, const char* name) {
  auto it = object.FindMember(name);
  if (it == object.MemberEnd() || !it->value.IsString()) return "";
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

}  // namespace

std::string SignParts(std::string_view key, const std::vector<std::string>& parts) {
  std::string data;
  for (const auto& part : parts) data += part;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac, &mac_len);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < mac_len; ++i) {
    hex.push_back(kHex[mac[i] >> 4]);
    hex.push_back(kHex[mac[i] & 15]);
  }
  return hex;
}

std::vector<std::string> EncodeMessage(const OutgoingMessage& m, std::string_view key) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("msg_id");
  String(w, m.msg_id);
  w.Key("session");
  String(w, m.session);
  w.Key("username");
  w.String("sandrun");
  w.Key("date");
  String(w, m.date);
  w.Key("msg_type");
  String(w, m.msg_type);
  w.Key("version");
  w.String("5.3");
  w.EndObject();
  std::vector<std::string> parts = {buffer.GetString(), "{}", "{}", m.content_json};
  std::vector<std::string> frames = {kDelimiter, SignParts(key, parts)};
  for (auto& part : parts) frames.push_back(std::move(part));
  return frames;
}

Result<IncomingMessage> DecodeMessage(const std::vector<std::string>& frames,
                                      std::string_view key) {
  size_t i = 0;
  while (i < frames.size() && frames[i] != kDelimiter) ++i;
  if (i == frames.size()) return Protocol("no <IDS|MSG> delimiter");
  if (frames.size() - i < 6) return Protocol("fewer than the 5 frames after the delimiter");
  const std::vector<std::string> signed_parts(frames.begin() + static_cast<ptrdiff_t>(i) + 2,
                                              frames.begin() + static_cast<ptrdiff_t>(i) + 6);
  const std::string expected = SignParts(key, signed_parts);
  const std::string& got = frames[i + 1];
  if (got.size() != expected.size() || CRYPTO_memcmp(got.data(), expected.data(), got.size())) {
    return Protocol("bad signature");
  }
  auto header = ParseObject(signed_parts[0], "header");
  if (!header.ok()) return header.error();
  auto parent = ParseObject(signed_parts[1], "parent_header");
  if (!parent.ok()) return parent.error();
  auto content = ParseObject(signed_parts[3], "content");
  if (!content.ok()) return content.error();
  IncomingMessage out;
  out.msg_type = StringMember(*header, "msg_type");
  if (out.msg_type.empty()) return Protocol("the header has no msg_type string");
  out.parent_msg_id = StringMember(*parent, "msg_id");
  out.content = std::move(*content);
  return out;
}

std::string StripAnsi(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\x1b') {
      out.push_back(text[i]);
      continue;
    }
    if (i + 1 >= text.size()) break;
    const char kind = text[i + 1];
    size_t j = i + 2;
    if (kind == '[') {  // CSI: parameters and intermediates, then a final byte 0x40-0x7e
      while (j < text.size() && !(text[j] >= 0x40 && text[j] <= 0x7e)) ++j;
      i = j;                   // the final byte (or the end)
    } else if (kind == ']') {  // OSC: up to BEL or ESC '\'
      while (j < text.size() && text[j] != '\x07' &&
             !(text[j] == '\x1b' && j + 1 < text.size() && text[j + 1] == '\\')) {
        ++j;
      }
      i = (j < text.size() && text[j] == '\x1b') ? j + 1 : j;
    } else {
      i = i + 1;  // two-byte escape
    }
  }
  return out;
}

std::string ExecuteRequestContent(const std::string& code) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("code");
  String(w, code);
  w.Key("silent");
  w.Bool(false);
  w.Key("store_history");
  w.Bool(true);
  w.Key("user_expressions");
  w.StartObject();
  w.EndObject();
  w.Key("allow_stdin");
  w.Bool(false);
  w.Key("stop_on_error");
  w.Bool(true);
  w.EndObject();
  return buffer.GetString();
}

std::string ConnectionFileJson(const std::string& path_prefix, const std::string& key) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("transport");
  w.String("ipc");
  w.Key("ip");
  String(w, path_prefix);
  const char* ports[] = {"shell_port", "iopub_port", "stdin_port", "control_port", "hb_port"};
  for (int i = 0; i < 5; ++i) {
    w.Key(ports[i]);
    w.Int(i + 1);
  }
  w.Key("key");
  String(w, key);
  w.Key("signature_scheme");
  w.String("hmac-sha256");
  w.Key("kernel_name");
  w.String("python3");
  w.EndObject();
  return buffer.GetString();
}

}  // namespace sandrun::kernel
