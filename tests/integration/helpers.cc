#include "helpers.h"

#include <openssl/evp.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "stack.h"

namespace sandrun::integration {
namespace {

// Runs can take up to the wall ceiling used in the tests; downloads are small.
constexpr time_t kReadTimeoutS = 120;

httplib::Client MakeClient() {
  httplib::Client client("127.0.0.1", Stack::Get().port());
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(kReadTimeoutS, 0);
  client.set_write_timeout(30, 0);
  // Links are already percent-encoded by the daemon; send them byte for byte.
  client.set_url_encode(false);
  return client;
}

// The answer of a request; a transport error as status 0 with its name as the body.
HttpResponse Answer(const httplib::Result& result) {
  HttpResponse response;
  if (!result) {
    response.body = httplib::to_string(result.error());
    return response;
  }
  response.status = result->status;
  response.body = result->body;
  response.headers = result->headers;
  return response;
}

std::string Digest(const EVP_MD* md, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  BOOST_REQUIRE(EVP_Digest(data.data(), data.size(), out, &len, md, nullptr) == 1);
  return std::string(reinterpret_cast<const char*>(out), len);
}

}  // namespace

HttpResponse FromResult(const httplib::Result& result, const std::string& what) {
  BOOST_REQUIRE_MESSAGE(result, what << ": no HTTP answer: " << httplib::to_string(result.error()));
  return Answer(result);
}

std::string HttpResponse::Header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? "" : it->second;
}

HttpResponse Get(const std::string& path_and_query) {
  auto client = MakeClient();
  return FromResult(client.Get(path_and_query.c_str()), "GET " + path_and_query);
}

void WaitForHealthz(const char* field, int64_t at_least, int timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int64_t value = -1;
  while (std::chrono::steady_clock::now() < deadline) {
    const HttpResponse health = Get("/healthz");
    rapidjson::Document doc;
    doc.Parse(health.body.c_str());
    value = !doc.HasParseError() && doc.IsObject() && doc.HasMember(field) && doc[field].IsInt64()
                ? doc[field].GetInt64()
                : -1;
    if (value >= at_least) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a poll, bounded above
  }
  BOOST_FAIL("/healthz " << field << " was " << value << ", not " << at_least << ", after "
                         << timeout_s << " s");
}

void WaitForActiveRuns(int64_t runs, int timeout_s) { WaitForHealthz("active", runs, timeout_s); }

HttpResponse Post(const std::string& path, const std::string& body,
                  const std::string& content_type) {
  auto client = MakeClient();
  return FromResult(client.Post(path.c_str(), body, content_type.c_str()), "POST " + path);
}

std::vector<HttpResponse> PostRunConcurrently(const std::string& body, int clients,
                                              int per_client) {
  std::mutex mu;
  std::vector<HttpResponse> answers;
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      auto client = MakeClient();
      for (int i = 0; i < per_client; ++i) {
        HttpResponse answer = Answer(client.Post("/run", body, "application/json"));
        std::lock_guard<std::mutex> lock(mu);
        answers.push_back(std::move(answer));
      }
    });
  }
  for (auto& t : threads) t.join();
  return answers;
}

HttpResponse GetUrl(const std::string& url) {
  const std::string base = Stack::Get().base_url();
  BOOST_REQUIRE_MESSAGE(url.rfind(base + "/", 0) == 0,
                        "URL '" << url << "' does not start with " << base << "/");
  return Get(url.substr(base.size()));
}

rapidjson::Document ParseJson(const std::string& body) {
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  BOOST_REQUIRE_MESSAGE(!doc.HasParseError(),
                        "not JSON (" << rapidjson::GetParseError_En(doc.GetParseError())
                                     << " at offset " << doc.GetErrorOffset() << "): " << body);
  return doc;
}

rapidjson::Document PostRun(const std::string& body) {
  HttpResponse response = Post("/run", body);
  BOOST_REQUIRE_MESSAGE(response.status == 200, "POST /run answered " << response.status << ": "
                                                                      << response.body
                                                                      << "\nrequest: " << body);
  BOOST_TEST(response.Header("Content-Type").rfind("application/json", 0) == 0);
  rapidjson::Document doc = ParseJson(response.body);
  BOOST_REQUIRE_MESSAGE(doc.IsObject(), "answer is not an object: " << response.body);
  BOOST_TEST_MESSAGE("POST /run " << body << "\n  -> " << response.body);
  return doc;
}

std::string RunRequest(const std::string& language, const std::string& code,
                       const std::map<std::string, int64_t>& limits) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  writer.StartObject();
  writer.Key("language");
  writer.String(language.c_str(), language.size());
  writer.Key("code");
  writer.String(code.c_str(), code.size());
  if (!limits.empty()) {
    writer.Key("limits");
    writer.StartObject();
    for (const auto& [name, value] : limits) {
      writer.Key(name.c_str(), name.size());
      writer.Int64(value);
    }
    writer.EndObject();
  }
  writer.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string Str(const rapidjson::Value& object, const char* key) {
  if (!object.IsObject() || !object.HasMember(key) || !object[key].IsString()) {
    BOOST_ERROR("member '" << key << "' missing or not a string");
    return "";
  }
  return std::string(object[key].GetString(), object[key].GetStringLength());
}

int64_t Int(const rapidjson::Value& object, const char* key) {
  if (!object.IsObject() || !object.HasMember(key) || !object[key].IsInt64()) {
    BOOST_ERROR("member '" << key << "' missing or not an integer");
    return -1;
  }
  return object[key].GetInt64();
}

ServiceError ParseServiceError(const std::string& body) {
  rapidjson::Document doc = ParseJson(body);
  BOOST_REQUIRE_MESSAGE(doc.IsObject() && doc.HasMember("error") && doc["error"].IsObject(),
                        "not {\"error\":{...}}: " << body);
  const rapidjson::Value& error = doc["error"];
  ServiceError out;
  out.code = Str(error, "code");
  out.message = Str(error, "message");
  if (error.HasMember("field") && error["field"].IsString()) {
    out.field = error["field"].GetString();
  }
  return out;
}

std::string Sha256Hex(const std::string& data) {
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : Digest(EVP_sha256(), data)) {
    hex += kHex[c >> 4];
    hex += kHex[c & 15];
  }
  return hex;
}

std::string SecureLinkMd5(const std::string& uri, int64_t expires, const std::string& secret) {
  const std::string md5 = Digest(EVP_md5(), std::to_string(expires) + uri + " " + secret);
  unsigned char b64[64];
  const int len = EVP_EncodeBlock(b64, reinterpret_cast<const unsigned char*>(md5.data()),
                                  static_cast<int>(md5.size()));
  std::string out(reinterpret_cast<const char*>(b64), len);
  for (char& c : out) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  out.erase(out.find_last_not_of('=') + 1);
  return out;
}

Link ParseLink(const std::string& url) {
  const std::string base = Stack::Get().base_url();
  BOOST_REQUIRE_MESSAGE(url.rfind(base + "/files/", 0) == 0,
                        "link '" << url << "' does not start with " << base << "/files/");
  const std::string rest = url.substr(base.size());
  const size_t question = rest.find('?');
  BOOST_REQUIRE_MESSAGE(question != std::string::npos, "link without query: " << url);
  Link link;
  link.path = rest.substr(0, question);
  std::istringstream query(rest.substr(question + 1));
  std::string pair;
  bool have_expires = false;
  while (std::getline(query, pair, '&')) {
    const size_t eq = pair.find('=');
    const std::string name = pair.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : pair.substr(eq + 1);
    if (name == "md5") link.md5 = value;
    if (name == "expires") {
      link.expires = std::stoll(value);
      have_expires = true;
    }
  }
  BOOST_REQUIRE_MESSAGE(!link.md5.empty() && have_expires, "link without md5/expires: " << url);
  return link;
}

std::string LinkPathAndQuery(const Link& link) {
  return link.path + "?md5=" + link.md5 + "&expires=" + std::to_string(link.expires);
}

int64_t NowEpochS() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

namespace {

std::string Base64(const std::string& data) {
  std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(data.data()),
                          static_cast<int>(data.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace

rapidjson::Document RunWithProbe(const std::string& command, const std::string& extra_members) {
  std::ifstream in(SANDRUN_PROBE_PATH, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  BOOST_REQUIRE_MESSAGE(!bytes.str().empty(), "probe not built: " << SANDRUN_PROBE_PATH);
  rapidjson::StringBuffer body;
  rapidjson::Writer<rapidjson::StringBuffer> w(body);
  w.StartObject();
  w.Key("language");
  w.String("bash");
  w.Key("files");
  w.StartArray();
  w.StartObject();
  w.Key("path");
  w.String("probe");
  w.Key("content_base64");
  w.String(Base64(bytes.str()).c_str());
  w.EndObject();
  w.EndArray();
  w.Key("code");
  w.String(("chmod +x probe\n" + command).c_str());
  w.EndObject();
  std::string text = body.GetString();
  if (!extra_members.empty()) text = text.substr(0, text.size() - 1) + ", " + extra_members + "}";
  return PostRun(text);
}

std::string Q(const std::string& text) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.String(text.c_str(), static_cast<rapidjson::SizeType>(text.size()));
  return buf.GetString();
}

std::string Line(const std::string& s, int n) {
  size_t at = 0;
  for (int i = 0; i < n && at != std::string::npos; ++i) {
    at = s.find('\n', at);
    if (at != std::string::npos) ++at;
  }
  return at == std::string::npos ? "" : s.substr(at, s.find('\n', at) - at);
}

}  // namespace sandrun::integration
