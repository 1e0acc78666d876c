// Every case of tests/data/hostile_cases/runs.jsonl (format in that folder's README.md) as a
// named test against the live stack (nginx + sandrund via scripts/serve). Each case's `expect`
// keys are checked, and after every case the host must be clean:
//   - no process of the run is left (host uids of the sandbox user and its root),
//   - no run directory, workspace mount or run cgroup is left,
//   - nothing owned by the sandbox's host uids appears outside the artifact store,
//   - a listener the test opens on the host's 127.0.0.1 receives no connection.
// The data file is part of the repository. If it is missing, empty or has a bad line, that is
// one failing test named for the problem (never a registration error that stops the binary).
// SANDRUN_HOSTILE_CASES=<path> reads another file (used to test exactly that).
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <set>

#include "helpers.h"
#include "host_state.h"
#include "stack.h"
#include "streamed.h"

namespace sandrun::integration {
namespace {

std::string CasesPath() {
  const char* path = std::getenv("SANDRUN_HOSTILE_CASES");
  if (path != nullptr && *path != '\0') return path;
  return std::string(SANDRUN_SOURCE_DIR) + "/tests/data/hostile_cases/runs.jsonl";
}

struct Case {
  std::string id;
  std::string line;  // the whole JSON line
};

struct CaseFile {
  std::vector<Case> cases;
  std::vector<std::string> problems;  // one per unusable line, or the file's own problem
};

// A line is a case if it is a JSON object with a string `name` not seen before and the
// objects `request` and `expect`.
CaseFile LoadCases(const std::string& path) {
  CaseFile file;
  std::ifstream in(path);
  if (!in) {
    file.problems.push_back("cannot open " + path);
    return file;
  }
  std::set<std::string> names;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    rapidjson::Document doc;
    doc.Parse(line.c_str());
    const std::string where = path + ":" + std::to_string(number);
    if (doc.HasParseError() || !doc.IsObject()) {
      file.problems.push_back(where + ": not a JSON object");
    } else if (!doc.HasMember("name") || !doc["name"].IsString() || !doc.HasMember("request") ||
               !doc["request"].IsObject() || !doc.HasMember("expect") ||
               !doc["expect"].IsObject()) {
      file.problems.push_back(where + ": needs a string `name` and objects `request`, `expect`");
    } else if (!names.insert(doc["name"].GetString()).second) {
      file.problems.push_back(where + ": duplicate name " + doc["name"].GetString());
    } else {
      file.cases.push_back({doc["name"].GetString(), line});
    }
  }
  if (file.cases.empty() && file.problems.empty()) file.problems.push_back(path + " has no case");
  return file;
}

std::string ToJson(const rapidjson::Value& v) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  v.Accept(w);
  return buffer.GetString();
}

// A TCP listener on the host's loopback that no sandbox may reach.
class HostListener {
 public:
  HostListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::listen(fd_, 16);
  }
  ~HostListener() { ::close(fd_); }
  int Accepted() {
    int n = 0;
    for (int c; (c = ::accept(fd_, nullptr, nullptr)) >= 0; ++n) ::close(c);
    return n;
  }

 private:
  int fd_ = -1;
};

HostListener& Listener() {
  static HostListener listener;
  return listener;
}

// Whether a case's request has the warm pool's shape (api/warm_start.cc WarmShapeFits): one
// program in `code`, no markdown, session, network, prepared environment or pip install, and
// the default disk_mb (100).
bool FitsWarmPool(const rapidjson::Value& request) {
  if (!request.HasMember("code") || !request["code"].IsString() || request.HasMember("markdown") ||
      request.HasMember("session") || request.HasMember("packages") ||
      request.HasMember("stateful") || request.HasMember("network")) {
    return false;
  }
  if (std::string(request["code"].GetString()).find("pip") != std::string::npos) return false;
  if (request.HasMember("limits") && request["limits"].HasMember("disk_mb") &&
      request["limits"]["disk_mb"].GetInt64() != 100) {
    return false;
  }
  return true;
}

void CheckHostIsClean(const std::string& id, const std::set<std::string>& owned_before) {
  BOOST_TEST_CONTEXT("case " << id << ": host after the run") {
    // A run's directory, tmpfs and cgroup go just after its response; the pool refills.
    (void)WaitForQuietHost(10);
    BOOST_TEST(SandboxProcessCount() == 0, "a process of the run is still alive");
    BOOST_TEST(RunDirCount() == 0, "run directories left");
    BOOST_TEST(RunMountCount() == 0, "workspace mounts left");
    BOOST_TEST(LeftoverRunCgroups() == 0, "run cgroups left");
    std::vector<std::string> added;
    for (const auto& path : SandboxOwnedOutsideWorkspace()) {
      if (owned_before.count(path) == 0) added.push_back(path);
    }
    BOOST_TEST(added.empty(), "files of the sandbox user outside the workspace: "
                                  << (added.empty() ? "" : added[0]));
    BOOST_TEST(Listener().Accepted() == 0, "the sandbox reached a host loopback listener");
  }
}

// integration.HostileCasesZygote: the same cases on a stack whose runs of the pool's shape start
// from the zygote (no pool: SANDRUN_IT_CONFIG {"zygote": true, "pool": {}}).
bool ZygoteStack() {
  const char* config = std::getenv("SANDRUN_IT_CONFIG");
  return config != nullptr && std::string(config).find("\"zygote\": true") != std::string::npos;
}

// integration.HostileCasesStreamed: the same cases asked for as a stream (SANDRUN_IT_STREAMED
// set): every event is JSON of valid UTF-8, what was streamed stays within the run's
// output_bytes, and the last event, the answer, is checked as a plain one is. A refusal stays
// plain JSON.
bool StreamedRuns() { return std::getenv("SANDRUN_IT_STREAMED") != nullptr; }

HttpResponse PostCase(const std::string& id, const std::string& body) {
  if (!StreamedRuns()) return Post("/run", body);
  const Streamed s = PostStreamed(body);
  BOOST_TEST_REQUIRE(s.status != 0, id << ": no HTTP answer");
  HttpResponse http;
  http.status = s.status;
  http.body = s.body;
  if (s.status != 200) return http;  // a refusal: plain JSON, checked below
  BOOST_TEST_REQUIRE(s.content_type == "application/x-ndjson",
                     id << ": answered " << s.content_type << ", not a stream");
  BOOST_TEST_MESSAGE(id << ": " << s.events.size() << " events streamed");
  for (const Event& e : s.events) {
    rapidjson::Document strict;
    strict.Parse<rapidjson::kParseValidateEncodingFlag>(e.line.c_str(), e.line.size());
    BOOST_TEST(!strict.HasParseError(),
               id << ": an event is not JSON of valid UTF-8: " << e.line.substr(0, 200));
  }
  BOOST_TEST_REQUIRE((!s.events.empty() && s.events.back().name == "result"),
                     id << ": the stream does not end in its answer: " << s.body.substr(0, 600));
  const rapidjson::Value& answer = s.events.back().doc["result"];
  if (answer.HasMember("limits") && answer["limits"].HasMember("output_bytes")) {
    const size_t streamed = StreamedOutput(s).size();
    BOOST_TEST(streamed <= answer["limits"]["output_bytes"].GetUint64(),
               id << ": " << streamed << " bytes of output streamed");
  }
  http.body = ToJson(answer);
  return http;
}

void RunCase(const Case& c) {
  rapidjson::Document doc;
  doc.Parse(c.line.c_str());
  const rapidjson::Value& expect = doc["expect"];
  const std::string body = ToJson(doc["request"]);
  Listener();  // opened before the first run
  const std::set<std::string> owned_before = SandboxOwnedOutsideWorkspace();
  // A case of the warm pool's shape runs in a waiting sandbox (the pool is full: the last
  // case's check waited for it), so every hostile input meets that path too.
  const bool warm = FitsWarmPool(doc["request"]) && !ZygoteStack();
  if (warm) (void)WaitForQuietHost(10);
  const int64_t hits_before = warm ? WarmPoolHits() : 0;
  auto start = std::chrono::steady_clock::now();
  HttpResponse http = PostCase(c.id, body);
  if (warm && http.status == 200) {
    BOOST_TEST(WarmPoolHits() == hits_before + 1, c.id << ": ran cold, not in the warm pool");
  }
  double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  BOOST_TEST_MESSAGE(c.id << ": HTTP " << http.status << " in " << wall_s
                          << " s: " << http.body.substr(0, 600));

  // status: a string or a list; "http_4xx" = refused before running.
  std::set<std::string> allowed;
  if (expect.HasMember("status")) {
    if (expect["status"].IsString()) allowed.insert(expect["status"].GetString());
    if (expect["status"].IsArray()) {
      for (const auto& s : expect["status"].GetArray()) allowed.insert(s.GetString());
    }
  }
  if (http.status >= 400 && http.status < 500) {
    BOOST_TEST(allowed.count("http_4xx") == 1u,
               c.id << ": refused with " << http.status << ": " << http.body);
    ServiceError err = ParseServiceError(http.body);
    BOOST_TEST(!err.message.empty());
    CheckHostIsClean(c.id, owned_before);
    return;
  }
  BOOST_TEST_REQUIRE(http.status == 200, c.id << ": HTTP " << http.status << ": " << http.body);
  rapidjson::Document r = ParseJson(http.body);
  const std::string status = Str(r, "status");
  BOOST_TEST((allowed.empty() || allowed.count(status) == 1u),
             c.id << ": status " << status << " not in the expected set; stderr: "
                  << (r.HasMember("stderr") ? r["stderr"].GetString() : ""));
  // Both streams are always there.
  BOOST_TEST_REQUIRE(r["stdout"].IsString());
  BOOST_TEST_REQUIRE(r["stderr"].IsString());
  const std::string output = std::string(r["stdout"].GetString()) + r["stderr"].GetString();

  for (const char* key : {"exit_code", "signal"}) {
    if (!expect.HasMember(key)) continue;
    if (expect[key].IsNull()) {
      BOOST_TEST(r[key].IsNull(), c.id << ": " << key << " should be null");
    } else {
      BOOST_TEST((r[key].IsInt() && r[key].GetInt() == expect[key].GetInt()),
                 c.id << ": " << key << " should be " << expect[key].GetInt());
    }
  }
  if (expect.HasMember("output_contains")) {
    for (const auto& s : expect["output_contains"].GetArray()) {
      BOOST_TEST(output.find(s.GetString()) != std::string::npos,
                 c.id << ": output lacks '" << s.GetString() << "': " << output.substr(0, 2000));
    }
  }
  if (expect.HasMember("output_not_contains")) {
    for (const auto& s : expect["output_not_contains"].GetArray()) {
      BOOST_TEST(output.find(s.GetString()) == std::string::npos,
                 c.id << ": output has '" << s.GetString() << "'");
    }
  }
  std::set<std::string> exported;
  int64_t total_bytes = 0;
  for (const auto& f : r["files"].GetArray()) {
    exported.insert(f["path"].GetString());
    total_bytes += f["size"].GetInt64();
  }
  if (expect.HasMember("files_exported")) {
    for (const auto& s : expect["files_exported"].GetArray()) {
      BOOST_TEST(exported.count(s.GetString()) == 1u, c.id << ": not exported: " << s.GetString());
    }
  }
  if (expect.HasMember("files_not_exported")) {
    for (const auto& s : expect["files_not_exported"].GetArray()) {
      BOOST_TEST(exported.count(s.GetString()) == 0u, c.id << ": exported: " << s.GetString());
    }
  }
  if (expect.HasMember("max_files_exported")) {
    BOOST_TEST(exported.size() <= expect["max_files_exported"].GetUint64());
  }
  if (expect.HasMember("max_total_file_bytes")) {
    BOOST_TEST(total_bytes <= expect["max_total_file_bytes"].GetInt64());
  }
  if (expect.HasMember("max_wall_s")) {
    BOOST_TEST(wall_s <= expect["max_wall_s"].GetDouble(), c.id << ": took " << wall_s << " s");
  }
  // Every exported file must be downloadable with its announced bytes, and none may carry
  // host content (the link target of a planted symlink).
  for (const auto& f : r["files"].GetArray()) {
    HttpResponse download = GetUrl(f["url"].GetString());
    BOOST_TEST(download.status == 200, c.id << ": download of " << f["path"].GetString());
    BOOST_TEST(Sha256Hex(download.body) == f["sha256"].GetString());
    BOOST_TEST(download.body.find("root:x:0:0") == std::string::npos);
  }
  CheckHostIsClean(c.id, owned_before);
}

// One test per case; every problem of the file together is one more test, `case_file_problems`,
// that fails and lists them (a unique name: Boost refuses the whole binary over a duplicate).
struct CaseRegistrar {
  CaseRegistrar() {
    auto& suite = boost::unit_test::framework::current_auto_test_suite();
    CaseFile file = LoadCases(CasesPath());
    if (!file.problems.empty()) {
      std::string text;
      for (const std::string& p : file.problems) text += "\n  " + p;
      suite.add(boost::unit_test::make_test_case(
          [text] { BOOST_FAIL("the hostile cases cannot all be read:" << text); },
          "case_file_problems", __FILE__, __LINE__));
    }
    for (const Case& c : file.cases) {
      suite.add(boost::unit_test::make_test_case([c] { RunCase(c); }, c.id, __FILE__, __LINE__));
    }
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(HostileCases)
// Registered at static initialisation, inside this suite (one test per case name).
static CaseRegistrar cases_registrar;
BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
