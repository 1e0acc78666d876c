// Streamed /run (Accept: application/x-ndjson, docs/DESIGN.md "Streamed /run") through nginx:
// a line reaches the client while its program still runs, the last event is the plain answer
// of the same request, output stays within output_bytes, markdown and notebook runs stream
// their plan and blocks, a client that goes away ends its run, and a refusal is plain JSON.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "helpers.h"
#include "host_state.h"
#include "stack.h"
#include "streamed.h"

namespace sandrun::integration {
namespace {

using Clock = std::chrono::steady_clock;

// The events' names in order, e.g. "plan step stdout step_end result".
std::string Names(const Streamed& s) {
  std::string names;
  for (const auto& e : s.events) names += (names.empty() ? "" : " ") + e.name;
  return names;
}

// The text of the `stream` events ("stdout", "stderr") of step `index`, joined.
std::string Text(const Streamed& s, const char* stream, int index) {
  std::string text;
  for (const auto& e : s.events) {
    if (e.name == stream && Int(e.doc, "index") == index) text += Str(e.doc, "text");
  }
  return text;
}

// `value` without the members that differ from one run to the next: the run's id, timings
// and usage, and links (url, expires_at).
void DropPerRun(rapidjson::Value& value) {
  if (value.IsArray()) {
    for (auto& v : value.GetArray()) DropPerRun(v);
    return;
  }
  if (!value.IsObject()) return;
  for (const char* key : {"id", "usage", "wall_ms", "url", "expires_at"}) value.RemoveMember(key);
  for (auto& m : value.GetObject()) DropPerRun(m.value);
}

std::string Normalised(const rapidjson::Value& answer) {
  rapidjson::Document copy;
  copy.CopyFrom(answer, copy.GetAllocator());
  DropPerRun(copy);
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  copy.Accept(w);
  return buffer.GetString();
}

const rapidjson::Value& LastResult(const Streamed& s) {
  BOOST_REQUIRE_MESSAGE(!s.events.empty() && s.events.back().name == "result",
                        "the stream does not end in a result event: " << Names(s));
  return s.events.back().doc["result"];
}

void RequireStream(const Streamed& s) {
  BOOST_REQUIRE_EQUAL(s.status, 200);
  BOOST_REQUIRE_EQUAL(s.content_type, "application/x-ndjson");
  BOOST_CHECK_EQUAL(s.accel_buffering, "no");
}

// The daemon's processes once both pools are full: a kernel the kernel pool boots to replace
// one an earlier case took (a_notebook_run_streams_its_cells), or a warm sandbox refilled,
// would otherwise be new processes that outlive the run under test. (The session kernel of
// a_stateful_cell_streams_from_the_sessions_kernel stays; it is in `before`.)
std::set<ProcessId> DaemonProcessesAtRest(pid_t daemon) {
  BOOST_REQUIRE(WaitForWarmPoolFull(60));
  WaitForKernelPoolFull();
  return Identify(ProcessTree(daemon));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(Streaming)

BOOST_AUTO_TEST_CASE(a_line_reaches_the_client_while_its_program_runs) {
  const std::string body =
      RunRequest("python", "import time\nprint('first')\ntime.sleep(2)\nprint('second')\n");
  const Streamed s = PostStreamed(body);
  RequireStream(s);
  BOOST_TEST_MESSAGE("events: " << Names(s));
  double first_at = -1, second_at = -1, end_at = -1;
  for (const auto& e : s.events) {
    if (e.name == "stdout" && e.line.find("first") != std::string::npos) first_at = e.at_s;
    if (e.name == "stdout" && e.line.find("second") != std::string::npos) second_at = e.at_s;
    if (e.name == "step_end") end_at = e.at_s;
  }
  BOOST_REQUIRE_MESSAGE(first_at >= 0 && second_at >= 0 && end_at >= 0, Names(s));
  BOOST_TEST_MESSAGE("first at " << first_at << " s, second at " << second_at << " s");
  // The program sleeps 2 s between its lines: the first came while it still ran.
  BOOST_CHECK_LT(first_at, end_at);
  BOOST_CHECK_GT(second_at - first_at, 1.0);
  BOOST_CHECK_EQUAL(Names(s), "step stdout stdout step_end result");
  BOOST_CHECK_EQUAL(Int(s.events.front().doc, "index"), 0);
  BOOST_CHECK_EQUAL(Str(LastResult(s), "stdout"), "first\nsecond\n");
}

BOOST_AUTO_TEST_CASE(a_markdown_run_streams_its_plan_and_blocks_and_ends_in_the_plain_answer) {
  const std::string markdown =
      "Two blocks:\n\n```python\nprint('hello')\nwith open('out.txt', 'w') as f:\n    "
      "f.write('x')\n```\n\n"
      "```bash\necho from bash >&2\n```\n";
  const std::string body = "{\"markdown\": " + Q(markdown) + "}";
  const Streamed s = PostStreamed(body);
  RequireStream(s);
  BOOST_TEST_MESSAGE("markdown run events: " << Names(s));
  for (const auto& e : s.events) BOOST_TEST_MESSAGE("  " << e.line.substr(0, 300));
  BOOST_CHECK_EQUAL(Names(s), "plan step stdout step_end step stderr step_end file result");
  BOOST_CHECK(s.events.front().doc["plan"].IsArray());
  BOOST_CHECK_EQUAL(Text(s, "stdout", 0), "hello\n");
  BOOST_CHECK_EQUAL(Text(s, "stderr", 1), "from bash\n");
  const rapidjson::Value& result = LastResult(s);
  const rapidjson::Document plain = PostRun(body);
  BOOST_CHECK_EQUAL(Normalised(result), Normalised(plain));
  // The file event is the answer's files[0], link and all.
  for (const auto& e : s.events) {
    if (e.name != "file") continue;
    BOOST_CHECK_EQUAL(Str(e.doc["file"], "path"), "out.txt");
    BOOST_CHECK_EQUAL(Str(e.doc["file"], "url"), Str(result["files"][0], "url"));
  }
}

BOOST_AUTO_TEST_CASE(a_print_flood_streams_no_more_than_output_bytes) {
  const std::string body =
      RunRequest("python", "import sys\nfor _ in range(160):\n    sys.stdout.write('x' * 65536)\n");
  const auto start = Clock::now();
  const Streamed s = PostStreamed(body);
  RequireStream(s);
  size_t streamed = 0;
  for (const auto& e : s.events) {
    if (e.name == "stdout" || e.name == "stderr") streamed += Str(e.doc, "text").size();
  }
  BOOST_TEST_MESSAGE("streamed " << streamed << " bytes of a 10 MiB flood in "
                                 << std::chrono::duration<double>(Clock::now() - start).count()
                                 << " s");
  const int64_t output_bytes = Int(LastResult(s)["limits"], "output_bytes");
  BOOST_CHECK_GT(streamed, 0u);
  BOOST_CHECK_LE(streamed, static_cast<size_t>(output_bytes));
  BOOST_CHECK_EQUAL(Str(LastResult(s), "status"), "output_limit");
}

BOOST_AUTO_TEST_CASE(a_notebook_run_streams_its_cells) {
  const std::string markdown =
      "```python\nimport time\na = 41\nprint('cell one')\n```\n\n"
      "```python\nprint(a + 1)\n```\n";
  const Streamed s = PostStreamed("{\"markdown\": " + Q(markdown) + "}");
  RequireStream(s);
  BOOST_TEST_MESSAGE("notebook run events: " << Names(s));
  BOOST_CHECK_EQUAL(Names(s), "plan step stdout step_end step stdout step_end result");
  BOOST_CHECK_EQUAL(Text(s, "stdout", 0), "cell one\n");
  BOOST_CHECK_EQUAL(Text(s, "stdout", 1), "42\n");
  BOOST_CHECK_EQUAL(Str(LastResult(s), "status"), "ok");
}

BOOST_AUTO_TEST_CASE(a_stateful_cell_streams_from_the_sessions_kernel) {
  const std::string body =
      "{\"language\": \"python\", \"session\": \"streamed\", \"stateful\": true, "
      "\"code\": \"import sys\\nprint('out')\\nprint('err', file=sys.stderr)\"}";
  const Streamed s = PostStreamed(body);
  RequireStream(s);
  BOOST_TEST_MESSAGE("stateful run events: " << Names(s));
  BOOST_CHECK_EQUAL(Text(s, "stdout", 0), "out\n");
  BOOST_CHECK_EQUAL(Text(s, "stderr", 0), "err\n");
  BOOST_CHECK_EQUAL(s.events.front().name, "step");
  BOOST_CHECK_EQUAL(Str(LastResult(s), "status"), "ok");
}

BOOST_AUTO_TEST_CASE(a_client_that_goes_away_ends_its_run) {
  const pid_t daemon = Stack::Get().DaemonPid();
  BOOST_REQUIRE_GT(daemon, 0);
  const std::set<ProcessId> before = DaemonProcessesAtRest(daemon);
  // disk_mb off the default: not a warm pool's sandbox (whose refill would be new processes).
  const std::string body = RunRequest("python",
                                      "import subprocess\nprint('started')\n"
                                      "subprocess.run(['sleep', '59.5'])\n",
                                      {{"disk_mb", 99}, {"wall_time_s", 60}});
  std::set<ProcessId> run;
  bool saw_sleep = false;
  Clock::time_point left_at;
  PostStreamed(body, [&](const Event& e) {
    if (e.name != "stdout") return false;
    // The program has started `sleep`: the run's processes are these.
    for (int i = 0; i < 100 && !saw_sleep; ++i) {
      for (const auto& [pid, argv] : ProcessArgvs()) {
        if (argv.size() == 2 && argv[0] == "sleep" && argv[1] == "59.5") saw_sleep = true;
      }
      if (!saw_sleep) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    for (const ProcessId& p : Identify(ProcessTree(daemon))) {
      if (before.count(p) == 0) run.insert(p);
    }
    left_at = Clock::now();
    return true;  // the client goes away
  });
  BOOST_REQUIRE(saw_sleep);
  BOOST_REQUIRE(!run.empty());
  const std::vector<pid_t> left = Survivors(run, 10);
  BOOST_TEST_MESSAGE(run.size() << " processes of the run; gone "
                                << std::chrono::duration<double>(Clock::now() - left_at).count()
                                << " s after the client left");
  BOOST_CHECK_MESSAGE(left.empty(), left.size() << " processes of the run outlived its client");
}

BOOST_AUTO_TEST_CASE(a_client_that_stops_reading_ends_its_run) {
  const pid_t daemon = Stack::Get().DaemonPid();
  BOOST_REQUIRE_GT(daemon, 0);
  const std::set<ProcessId> before = DaemonProcessesAtRest(daemon);
  // 48 MiB of output allowed and a minute of wall time: more than every buffer between the
  // program and this client holds, long past the daemon's 10 s for a stalled write.
  const std::string body = RunRequest(
      "python", "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n",
      {{"output_bytes", 48 << 20}, {"wall_time_s", 60}, {"cpu_time_s", 60}, {"disk_mb", 99}});
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  BOOST_REQUIRE_GE(fd, 0);
  const int small = 4096;
  (void)::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(Stack::Get().port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE_EQUAL(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string request =
      "POST /run HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/x-ndjson\r\n"
      "Content-Type: application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  BOOST_REQUIRE_EQUAL(::write(fd, request.data(), request.size()),
                      static_cast<ssize_t>(request.size()));
  // The run's processes, once its sandbox is there (the client reads nothing, ever).
  std::set<ProcessId> run;
  const auto start = Clock::now();
  while (run.size() < 2 && Clock::now() - start < std::chrono::seconds(20)) {
    for (const ProcessId& p : Identify(ProcessTree(daemon))) {
      if (before.count(p) == 0) run.insert(p);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  BOOST_REQUIRE_GE(run.size(), 2u);
  const std::vector<pid_t> left = Survivors(run, 25);
  BOOST_TEST_MESSAGE("a client that stopped reading: its run ended "
                     << std::chrono::duration<double>(Clock::now() - start).count()
                     << " s after it started");
  ::close(fd);
  BOOST_CHECK_MESSAGE(left.empty(), left.size() << " processes of the run outlived 25 s");
}

BOOST_AUTO_TEST_CASE(a_refusal_before_the_run_is_the_plain_json_error) {
  const std::string body = "{\"language\": \"python\", \"code\": 1}";
  const Streamed s = PostStreamed(body);
  const HttpResponse plain = Post("/run", body);
  BOOST_CHECK_EQUAL(s.status, 400);
  BOOST_CHECK_EQUAL(s.content_type, "application/json");
  BOOST_CHECK_EQUAL(s.body, plain.body);
  BOOST_CHECK_EQUAL(ParseServiceError(s.body).field, "code");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
