// Running like a service, through the real nginx and daemon: the request
// id in the response header, nginx's access log and the daemon's JSON log line; log lines
// that are JSON and carry no code or output; GET /readyz; SIGHUP re-reading the config's live
// keys (tokens, ceilings) while keeping the running config when the file is refused.
// The suite's stack has one sandbox slot and no queue (tests/integration/CMakeLists.txt), so
// that one run makes it "not ready".
#include <httplib.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <signal.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fake_internet.h"
#include "helpers.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

using Clock = std::chrono::steady_clock;

bool WaitUntil(const std::function<bool()>& done, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (!done()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::string DaemonLog() { return ReadFile(Stack::Get().state_dir() + "/logs/sandrund.log"); }
std::string AccessLog() { return ReadFile(Stack::Get().state_dir() + "/nginx/logs/access.log"); }

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The daemon's JSON log lines (those starting with '{'); each must parse.
std::vector<rapidjson::Document> JsonLogLines() {
  std::vector<rapidjson::Document> out;
  for (const auto& line : Lines(DaemonLog())) {
    if (line.empty() || line[0] != '{') continue;
    rapidjson::Document doc;
    doc.Parse(line.c_str());
    BOOST_TEST_REQUIRE(!doc.HasParseError(), "log line is not JSON: " << line);
    BOOST_TEST_REQUIRE(doc.IsObject(), line);
    out.push_back(std::move(doc));
  }
  return out;
}

int CountEvents(const std::string& event) {
  int n = 0;
  for (const auto& doc : JsonLogLines()) {
    if (doc.HasMember("event") && doc["event"].IsString() && event == doc["event"].GetString()) {
      ++n;
    }
  }
  return n;
}

// The JSON line of request `id`; a null document if there is none yet.
rapidjson::Document RequestLine(const std::string& id) {
  for (auto& doc : JsonLogLines()) {
    if (doc.HasMember("request_id") && doc["request_id"].IsString() &&
        id == doc["request_id"].GetString()) {
      return std::move(doc);
    }
  }
  return rapidjson::Document();
}

HttpResponse PostRunAs(const std::string& token, const std::string& body) {
  httplib::Client client("127.0.0.1", Stack::Get().port());
  client.set_read_timeout(60, 0);
  httplib::Headers headers;
  if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
  return FromResult(client.Post("/run", headers, body, "application/json"), "POST /run");
}

// The daemon's config as scripts/serve wrote it (JSON after its // comment lines).
std::string ConfigPath() { return Stack::Get().state_dir() + "/sandrun.jsonc"; }

rapidjson::Document ReadConfig() {
  std::string json;
  for (const auto& line : Lines(ReadFile(ConfigPath()))) {
    if (line.rfind("//", 0) != 0) json += line + "\n";
  }
  return ParseJson(json);
}

void WriteText(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    BOOST_TEST_REQUIRE(out.good(), "cannot write " << tmp);
  }
  BOOST_TEST_REQUIRE(std::rename(tmp.c_str(), path.c_str()) == 0);
}

void WriteConfig(const rapidjson::Document& doc) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  doc.Accept(w);
  WriteText(ConfigPath(), std::string("// edited by operations_test\n") + buffer.GetString());
}

void SetMember(rapidjson::Document& doc, rapidjson::Value& object, const char* key,
               rapidjson::Value value) {
  auto& a = doc.GetAllocator();
  if (object.HasMember(key)) {
    object[key] = value;
  } else {
    object.AddMember(rapidjson::Value(key, a), value, a);
  }
}

rapidjson::Value& Object(rapidjson::Document& doc, const char* key) {
  if (!doc.HasMember(key)) {
    SetMember(doc, doc, key, rapidjson::Value(rapidjson::kObjectType));
  }
  return doc[key];
}

// Sends SIGHUP and waits for the daemon's log line `event` (config_reloaded or
// config_reload_failed) that answers it; returns that line.
rapidjson::Document Sighup(const std::string& event) {
  const int before = CountEvents(event);
  const pid_t daemon = Stack::Get().DaemonPid();
  BOOST_TEST_REQUIRE(daemon > 0);
  BOOST_TEST_REQUIRE(kill(daemon, SIGHUP) == 0);
  BOOST_TEST_REQUIRE(WaitUntil([&] { return CountEvents(event) > before; }, 20),
                     "no " << event << " log line after SIGHUP:\n"
                           << Stack::Get().LogTails());
  std::vector<rapidjson::Document> lines = JsonLogLines();
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    if ((*it).HasMember("event") && event == (*it)["event"].GetString()) return std::move(*it);
  }
  return rapidjson::Document();
}

bool ArrayHas(const rapidjson::Value& object, const char* key, const std::string& value) {
  if (!object.HasMember(key) || !object[key].IsArray()) return false;
  for (const auto& v : object[key].GetArray()) {
    if (v.IsString() && value == v.GetString()) return true;
  }
  return false;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(Operations)

// `sandrund check` beside a live daemon (OPERATIONS.md: safe to run so), as the README runs
// it: from the daemon's own cgroup, with its config. It works under a cgroup name of its own
// (`<cgroup_name>-check-<pid>`, main.cc): with the daemon's, its start-up sweep would take
// the live kernel for an earlier daemon's leftover and kill it (seen by taking the suffix out).
BOOST_AUTO_TEST_CASE(check_beside_a_live_daemon_leaves_its_kernels_alone) {
  const std::string kernel =
      R"({"language": "python", "stateful": true, "session": "check-beside", "code": )";
  rapidjson::Document first = PostRun(kernel + R"("kept = 41"})");
  BOOST_TEST_REQUIRE(Str(first, "status") == "ok", Str(first, "stderr"));
  // The root template of a check that was killed (a pid above pid_max: never running); the
  // daemon's start leaves dot-names alone, so this check removes it.
  const std::string dead = Stack::Get().state_dir() + "/runs/.root-template-check-4000000000";
  std::filesystem::create_directories(dead + "/root");
  int status = -1;
  const std::string out = Shell(std::string(SANDRUN_BUILD_DIR) + "/src/sandrund check --config " +
                                    Stack::Get().state_dir() + "/sandrun.jsonc 2>&1",
                                &status);
  BOOST_TEST(status == 0, out);
  BOOST_TEST(out.find("ok: this host can run sandboxes") != std::string::npos, out);
  BOOST_TEST(!std::filesystem::exists(dead), "a dead check's root template was left");
  rapidjson::Document second = PostRun(kernel + R"j("print(kept + 1)"})j");
  BOOST_TEST(Str(second, "stdout") == "42\n", Str(second, "stderr"));
}

BOOST_AUTO_TEST_CASE(request_id_in_header_access_log_and_json_log) {
  HttpResponse health = Get("/healthz");
  BOOST_TEST(health.status == 200, health.body);
  BOOST_TEST(health.headers.count("X-Request-Id") == 1u, "exactly one X-Request-Id header");
  const std::string id = health.Header("X-Request-Id");
  BOOST_TEST_REQUIRE(std::regex_match(id, std::regex("[0-9a-f]{32}")), "request id '" << id << "'");
  BOOST_TEST_REQUIRE(WaitUntil([&] { return !RequestLine(id).IsNull(); }, 10),
                     "no daemon log line with request_id " << id << "\n"
                                                           << DaemonLog());
  BOOST_TEST(WaitUntil([&] { return AccessLog().find("rid=" + id) != std::string::npos; }, 10),
             "nginx's access log has no rid=" << id);
  rapidjson::Document line = RequestLine(id);
  BOOST_TEST(Str(line, "event") == "request");
  BOOST_TEST(Str(line, "path") == "/healthz");
  BOOST_TEST(Int(line, "status") == 200);
  BOOST_TEST(Int(line, "ms") >= 0);

  // nginx's own answers (a bad link: 403) carry an id too.
  HttpResponse denied = Get("/files/x/y/z.txt?md5=AAAA&expires=1");
  BOOST_TEST(denied.status == 403);
  BOOST_TEST(std::regex_match(denied.Header("X-Request-Id"), std::regex("[0-9a-f]{32}")));
}

BOOST_AUTO_TEST_CASE(run_log_line_is_json_with_user_status_timings_and_no_code_or_output) {
  const std::string marker = "SECRET-CODE-MARKER-7f3a";
  const std::string code = "s = '" + marker + "'\\nprint(s[::-1] + s)";
  HttpResponse run =
      Post("/run", R"({"language":"python","user":"dora","code":")" + code + R"("})");
  BOOST_TEST_REQUIRE(run.status == 200, run.body);
  BOOST_TEST_REQUIRE(run.body.find(marker) != std::string::npos, "the run printed the marker");
  const std::string id = run.Header("X-Request-Id");
  BOOST_TEST_REQUIRE(WaitUntil([&] { return !RequestLine(id).IsNull(); }, 10), DaemonLog());
  rapidjson::Document line = RequestLine(id);
  BOOST_TEST(Str(line, "path") == "/run");
  BOOST_TEST(Str(line, "method") == "POST");
  BOOST_TEST(Int(line, "status") == 200);
  BOOST_TEST(Str(line, "user") == "dora");
  BOOST_TEST(Str(line, "run_status") == "ok");
  BOOST_TEST(Int(line, "run_ms") >= 0);
  BOOST_TEST(Int(line, "queue_ms") >= 0);
  BOOST_TEST(Int(line, "ms") >= Int(line, "run_ms"));
  const std::string log = DaemonLog();
  BOOST_TEST(log.find(marker) == std::string::npos, "the code or its output is in the log");
  std::string reversed(marker.rbegin(), marker.rend());
  BOOST_TEST(log.find(reversed) == std::string::npos, "the run's output is in the log");
  // Every request line of the log parses (JsonLogLines requires it) and has the same keys.
  int requests = 0;
  for (const auto& doc : JsonLogLines()) {
    if (std::string(doc["event"].GetString()) != "request") continue;
    ++requests;
    for (const char* key : {"time", "request_id", "method", "path", "status", "ms"}) {
      BOOST_TEST(doc.HasMember(key), "a request line without " << key);
    }
  }
  BOOST_TEST(requests >= 2);
}

BOOST_AUTO_TEST_CASE(readyz_says_whether_a_run_can_start_now) {
  HttpResponse ready = Get("/readyz");
  BOOST_TEST_REQUIRE(ready.status == 200, ready.body);
  rapidjson::Document doc = ParseJson(ready.body);
  BOOST_TEST(doc["ready"].GetBool());
  BOOST_TEST(doc["reasons"].GetArray().Size() == 0u);
  BOOST_TEST(Int(doc, "free_slots") == 1);
  BOOST_TEST(Int(doc, "queue_free") == 0);
  BOOST_TEST(Int(doc, "artifacts_free_mb") > 0);

  // The one slot taken, no queue: not ready, with the reason; /healthz stays 200.
  auto busy = std::async(std::launch::async,
                         [] { return Post("/run", RunRequest("bash", "sleep 3; echo done")); });
  BOOST_TEST_REQUIRE(
      WaitUntil([] { return Int(ParseJson(Get("/healthz").body), "active") == 1; }, 20));
  HttpResponse not_ready = Get("/readyz");
  BOOST_TEST(not_ready.status == 503, not_ready.body);
  BOOST_TEST(not_ready.Header("Retry-After") == "5");
  rapidjson::Document why = ParseJson(not_ready.body);
  BOOST_TEST(!why["ready"].GetBool());
  BOOST_TEST_REQUIRE(why["reasons"].GetArray().Size() == 1u, not_ready.body);
  BOOST_TEST(std::string(why["reasons"][0].GetString()).find("busy") != std::string::npos);
  BOOST_TEST(Get("/healthz").status == 200);
  HttpResponse done = busy.get();
  BOOST_TEST(done.status == 200, done.body);
  BOOST_TEST(Get("/readyz").status == 200);
}

// A stateful run's cell holds the one sandbox slot while it runs, as any run does: a run
// beside it is refused busy (the warm pool's "CPUs busy" test counts it too, from the same
// count). Between cells its kernel holds no slot: it is frozen and runs nothing.
BOOST_AUTO_TEST_CASE(a_kernel_holds_a_sandbox_slot_only_while_its_cell_runs) {
  const std::string start =
      R"({"language": "python", "stateful": true, "user": "kim", "session": "slot", "code": "x = 1"})";
  rapidjson::Document started = PostRun(start);
  BOOST_TEST_REQUIRE(Str(started, "status") == "ok", Str(started, "stderr"));
  BOOST_TEST(Int(ParseJson(Get("/healthz").body), "active") == 0);
  auto cell = std::async(std::launch::async, [] {
    return Post("/run",
                R"j({"language": "python", "stateful": true, "user": "kim", "session": "slot", )j"
                R"j("code": "import time\ntime.sleep(5)\nprint(x)"})j");
  });
  BOOST_TEST_REQUIRE(
      WaitUntil([] { return Int(ParseJson(Get("/healthz").body), "active") == 1; }, 20));
  HttpResponse beside = Post("/run", RunRequest("bash", "echo beside"));
  BOOST_TEST(beside.status == 503, beside.body);
  BOOST_TEST(ParseServiceError(beside.body).code == "busy", beside.body);
  HttpResponse done = cell.get();
  BOOST_TEST(done.status == 200, done.body);
  BOOST_TEST(Str(ParseJson(done.body), "stdout") == "1\n", done.body);
  // The kernel lives on between cells, holding no slot.
  BOOST_TEST(Int(ParseJson(Get("/healthz").body), "active") == 0);
  rapidjson::Document after = PostRun(RunRequest("bash", "echo after"));
  BOOST_TEST(Str(after, "stdout") == "after\n", Str(after, "stderr"));
}

BOOST_AUTO_TEST_CASE(sighup_reloads_tokens_and_ceilings_and_keeps_a_refused_file) {
  const std::string tokens_path = Stack::Get().state_dir() + "/tokens";
  const std::string t1 = "ops-token-one-0123456789abcdef";
  const std::string t2 = "ops-token-two-0123456789abcdef";
  const std::string original = ReadFile(ConfigPath());
  const std::string print1 = RunRequest("python", "print(1)");
  BOOST_TEST_REQUIRE(PostRunAs("", print1).status == 200, "anonymous use before the reload");

  // A file the daemon must refuse (a limit above its ceiling): nothing changes.
  WriteText(tokens_path, "# tokens of operations_test\n" + t1 + "\n");
  rapidjson::Document bad = ReadConfig();
  SetMember(bad, Object(bad, "ceilings"), "wall_time_s", rapidjson::Value(5));
  SetMember(bad, Object(bad, "limits"), "wall_time_s", rapidjson::Value(10));
  WriteConfig(bad);
  rapidjson::Document failed = Sighup("config_reload_failed");
  BOOST_TEST(Str(failed, "error").find("wall_time_s") != std::string::npos);
  BOOST_TEST(PostRunAs("", print1).status == 200, "the refused file changed the running config");

  // Tokens instead of anonymous use, a lower ceiling, and a key that needs a restart.
  rapidjson::Document next = ReadConfig();
  auto& a = next.GetAllocator();
  SetMember(next, next, "allow_anonymous", rapidjson::Value(false));
  SetMember(next, next, "tokens_file", rapidjson::Value(tokens_path.c_str(), a));
  SetMember(next, Object(next, "limits"), "wall_time_s", rapidjson::Value(3));
  SetMember(next, next, "max_queue", rapidjson::Value(7));
  WriteConfig(next);
  rapidjson::Document reloaded = Sighup("config_reloaded");
  for (const char* key :
       {"allow_anonymous", "tokens", "tokens_file", "ceilings.wall_time_s", "limits.wall_time_s"}) {
    BOOST_TEST(ArrayHas(reloaded, "applied", key), "applied lacks " << key);
  }
  BOOST_TEST(ArrayHas(reloaded, "needs_restart", "max_queue"));
  BOOST_TEST(!ArrayHas(reloaded, "needs_restart", "tokens"));

  HttpResponse anonymous = PostRunAs("", print1);
  BOOST_TEST(anonymous.status == 401, anonymous.body);
  HttpResponse with_t1 = PostRunAs(t1, print1);
  BOOST_TEST(with_t1.status == 200, with_t1.body);
  BOOST_TEST(PostRunAs(t2, print1).status == 401, "t2 works before it is in the file");
  HttpResponse above = PostRunAs(t1, RunRequest("python", "print(1)", {{"wall_time_s", 10}}));
  BOOST_TEST(above.status == 400, above.body);
  BOOST_TEST(ParseServiceError(above.body).field == "limits.wall_time_s", above.body);
  HttpResponse within = PostRunAs(t1, RunRequest("python", "print(1)", {{"wall_time_s", 5}}));
  BOOST_TEST(within.status == 200, within.body);
  // The default limit of the reloaded file applies: 3 s.
  HttpResponse slow = PostRunAs(t1, RunRequest("bash", "sleep 8; echo late"));
  BOOST_TEST_REQUIRE(slow.status == 200, slow.body);
  BOOST_TEST(Str(ParseJson(slow.body), "status") == "timeout", slow.body);
  // The queue size did not change (it needs a restart): readyz still has no queue room.
  BOOST_TEST(Int(ParseJson(Get("/readyz").body), "queue_free") == 0);

  // A token added to the file works after the next SIGHUP; a removed one stops working.
  WriteText(tokens_path, "# tokens of operations_test\n" + t2 + "\n");
  rapidjson::Document again = Sighup("config_reloaded");
  BOOST_TEST(ArrayHas(again, "applied", "tokens"));
  BOOST_TEST(PostRunAs(t2, print1).status == 200);
  BOOST_TEST(PostRunAs(t1, print1).status == 401);

  // Back to the suite's config, anonymous use included.
  WriteText(ConfigPath(), original);
  Sighup("config_reloaded");
  BOOST_TEST(PostRunAs("", print1).status == 200);
  // The secrets never reach the log.
  BOOST_TEST(DaemonLog().find(t1) == std::string::npos);
  BOOST_TEST(DaemonLog().find(t2) == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
