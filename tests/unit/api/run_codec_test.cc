#define BOOST_TEST_MODULE run_codec
#include "api/run_codec.h"

#include <rapidjson/document.h>

#include <boost/test/unit_test.hpp>

#include "run/run_steps.h"

using namespace sandrun;

namespace {

config::Config TestConfig() {
  config::Config c;
  c.languages = {{"python", {"py", "python3"}, "main.py", {"/usr/bin/python3", "{file}"}},
                 {"bash", {"sh"}, "main.sh", {"/bin/bash", "{file}"}}};
  c.ceilings.memory_mb = 1024;
  return c;
}

// The refusal of `body`, or nullopt with the request in *out (when given).
std::optional<api::ApiError> Decode(const std::string& body, api::RunRequest* out = nullptr,
                                    const std::string& header_user = "") {
  static config::Config config = TestConfig();
  auto decoded = api::DecodeRunRequest(body, header_user, "", config);
  if (!decoded.ok()) return decoded.error();
  if (out != nullptr) *out = std::move(*decoded);
  return std::nullopt;
}

// A RunResponse with every optional member set.
api::RunResponse FullResponse() {
  api::RunResponse r;
  r.id = "run-1";
  r.status = api::RunStatus::kTimeout;
  r.exit_code = 1;
  r.signal = 9;
  r.stdout_stream = {"out", true};
  r.stderr_stream = {"err", false};
  storage::ArtifactFile f{"a.png", "out/a.png", 12, "image/png", "ab", "http://x/a", 99};
  r.files = {f};
  r.files_skipped = {{"link", "symlink"}};
  r.displays = {{"image", "image/png", std::nullopt, f},
                {"text", "text/plain", "hi", std::nullopt}};
  r.wall_ms = 5;
  r.cpu_ms = 4;
  r.max_rss_kb = 3;
  r.net_rx_bytes = 100;
  r.net_tx_bytes = 200;
  api::StepResult s;
  s.index = 2;
  s.language = "python";
  s.code = "print(1)";
  s.status = api::RunStatus::kOk;
  s.exit_code = 0;
  s.stdout_stream = {"1\n", false};
  s.wall_ms = 7;
  s.budget = "install";
  api::StepResult t = s;
  t.budget = "";
  t.signal = 15;
  r.steps = std::vector<api::StepResult>{s, t};
  r.plan = std::vector<api::PlanEntry>{{0, "python", true, "main code"}, {1, "", false, "no"}};
  r.environment = api::EnvironmentReport{"env1", {"numpy==1"}, "built", 1234};
  r.kernel = api::KernelInfo{"kept", 3};
  r.session_restarted = true;
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(RunCodec)

BOOST_AUTO_TEST_CASE(decodes_a_minimal_request_with_alias) {
  api::RunRequest r;
  BOOST_TEST(!Decode(R"j({"language":"py","code":"print(1)"})j", &r));
  BOOST_TEST_REQUIRE(r.steps.size() == 1u);
  BOOST_TEST(r.steps[0].language->name == "python");
  BOOST_TEST(r.steps[0].code == "print(1)");
  BOOST_TEST(r.user == "anonymous");
  BOOST_TEST(r.limits.memory_mb == 512);
}

BOOST_AUTO_TEST_CASE(bad_json_names_the_offset) {
  auto err = Decode(R"({"language":)");
  BOOST_TEST_REQUIRE(err.has_value());
  BOOST_TEST(err->status == 400);
  BOOST_TEST(err->code == "invalid_json");
  BOOST_TEST(err->message.find("offset 12") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(unknown_field_is_named) {
  auto err = Decode(R"({"language":"py","code":"1","colour":"red"})");
  BOOST_TEST_REQUIRE(err.has_value());
  BOOST_TEST(err->code == "unknown_field");
  BOOST_TEST(err->field == "colour");
}

BOOST_AUTO_TEST_CASE(wrong_type_is_named) {
  auto err = Decode(R"({"language":"py","code":42})");
  BOOST_TEST_REQUIRE(err.has_value());
  BOOST_TEST(err->code == "wrong_type");
  BOOST_TEST(err->field == "code");
}

BOOST_AUTO_TEST_CASE(unknown_language_lists_the_configured_ones) {
  auto err = Decode(R"({"language":"cobol","code":"x"})");
  BOOST_TEST_REQUIRE(err.has_value());
  BOOST_TEST(err->code == "unknown_language");
  BOOST_TEST(err->message.find("python, bash") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(limit_above_ceiling_is_refused_and_lower_is_taken) {
  auto err = Decode(R"({"language":"py","code":"x","limits":{"memory_mb":2048}})");
  BOOST_TEST_REQUIRE(err.has_value());
  BOOST_TEST(err->code == "limit_above_ceiling");
  BOOST_TEST(err->field == "limits.memory_mb");
  api::RunRequest r;
  BOOST_TEST(
      !Decode(R"({"language":"py","code":"x","limits":{"memory_mb":1024,"wall_time_s":2}})", &r));
  BOOST_TEST(r.limits.memory_mb == 1024);
  BOOST_TEST(r.limits.wall_time_s == 2);
}

BOOST_AUTO_TEST_CASE(unknown_limit_and_fraction_are_refused) {
  BOOST_TEST(Decode(R"({"language":"py","code":"x","limits":{"gpu":1}})")->field == "limits.gpu");
  BOOST_TEST(Decode(R"({"language":"py","code":"x","limits":{"wall_time_s":1.5}})")->code ==
             "wrong_type");
  BOOST_TEST(Decode(R"({"language":"py","code":"x","limits":{"wall_time_s":0}})")->code ==
             "limit_below_minimum");
}

BOOST_AUTO_TEST_CASE(network_is_forbidden_with_403) {
  auto err = Decode(R"({"language":"py","code":"x","network":true})");
  BOOST_TEST_REQUIRE(err.has_value());
  BOOST_TEST(err->status == 403);
  BOOST_TEST(err->code == "network_forbidden");
  BOOST_TEST(err->field == "network");
  BOOST_TEST(!Decode(R"({"language":"py","code":"x","network":false})"));
}

BOOST_AUTO_TEST_CASE(network_follows_the_configured_mode) {
  config::Config c = TestConfig();
  c.network = "on_request";
  auto r = api::DecodeRunRequest(R"({"language":"py","code":"x","network":true})", "", "", c);
  BOOST_TEST_REQUIRE(r.ok());
  BOOST_TEST(r->network);
  auto plain = api::DecodeRunRequest(R"({"language":"py","code":"x"})", "", "", c);
  BOOST_TEST_REQUIRE(plain.ok());
  BOOST_TEST(!plain->network);
  c.network = "always";
  auto always = api::DecodeRunRequest(R"({"language":"py","code":"x"})", "", "", c);
  BOOST_TEST_REQUIRE(always.ok());
  BOOST_TEST(always->network);
}

BOOST_AUTO_TEST_CASE(nul_byte_in_code_is_refused_with_its_offset) {
  auto err = Decode("{\"language\":\"py\",\"code\":\"ab\\u0000c\"}");
  BOOST_TEST_REQUIRE(err.has_value());
  BOOST_TEST(err->code == "invalid_code");
  BOOST_TEST(err->field == "code");
  BOOST_TEST(err->message.find("null byte") != std::string::npos);
  BOOST_TEST(err->message.find("offset 2") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(nul_bytes_in_stdin_are_kept) {
  api::RunRequest r;
  BOOST_TEST(!Decode("{\"language\":\"py\",\"code\":\"x\",\"stdin\":\"a\\u0000b\"}", &r));
  BOOST_TEST(r.stdin_data.size() == 3u);
}

BOOST_AUTO_TEST_CASE(invalid_utf8_body_is_refused) {
  auto err = Decode("{\"language\":\"py\",\"code\":\"\xff\"}");
  BOOST_TEST_REQUIRE(err.has_value());
  BOOST_TEST(err->code == "invalid_json");
}

BOOST_AUTO_TEST_CASE(deep_nesting_does_not_crash) {
  std::string body = R"({"language":"py","code":"x","limits":)" + std::string(100000, '[') +
                     std::string(100000, ']') + "}";
  auto err = Decode(body);
  BOOST_TEST_REQUIRE(err.has_value());
  BOOST_TEST(err->status == 400);
}

BOOST_AUTO_TEST_CASE(header_user_applies_when_body_has_none) {
  api::RunRequest r;
  BOOST_TEST(!Decode(R"({"language":"py","code":"x"})", &r, "alice"));
  BOOST_TEST(r.user == "alice");
  // A body naming another user than the header is refused, below.
}

BOOST_AUTO_TEST_CASE(encodes_nulls_and_replaces_invalid_utf8) {
  api::RunResponse r;
  r.id = "abc";
  r.status = api::RunStatus::kError;
  r.exit_code = 139;
  r.stdout_stream.text = "broken \xff\xfe bytes";
  r.files_skipped.push_back({"passwd", "symlink"});
  std::string json = api::EncodeRunResponse(r);
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseValidateEncodingFlag>(json.c_str());
  BOOST_TEST_REQUIRE(!doc.HasParseError());
  BOOST_TEST(doc["exit_code"].GetInt() == 139);
  BOOST_TEST(doc["signal"].IsNull());
  BOOST_TEST(std::string(doc["stdout"].GetString()) == "broken \xEF\xBF\xBD\xEF\xBF\xBD bytes");
  BOOST_TEST(std::string(doc["stderr"].GetString()).empty());
  BOOST_TEST(doc["files_skipped"][0]["reason"].GetString() == std::string("symlink"));
  BOOST_TEST(doc["limits"]["wall_time_s"].GetInt() == 10);
}

BOOST_AUTO_TEST_CASE(encodes_every_member_in_the_documented_order) {
  // Byte for byte what clients have always got, every optional member set.
  const std::string expected =
      R"j({"id":"run-1","status":"timeout","exit_code":1,"signal":9,"stdout":"out","stderr":"e)j"
      R"j(rr","stdout_truncated":true,"stderr_truncated":false,"files":[{"name":"a.png","path")j"
      R"j(:"out/a.png","size":12,"mime":"image/png","sha256":"ab","url":"http://x/a","expires_)j"
      R"j(at":99}],"displays":[{"kind":"image","mime":"image/png","file":{"name":"a.png","path)j"
      R"j(":"out/a.png","size":12,"mime":"image/png","sha256":"ab","url":"http://x/a","expires)j"
      R"j(_at":99}},{"kind":"text","mime":"text/plain","text":"hi"}],"files_skipped":[{"path":)j"
      R"j("link","reason":"symlink"}],"usage":{"wall_ms":5,"cpu_ms":4,"max_rss_kb":3,"net_rx_b)j"
      R"j(ytes":100,"net_tx_bytes":200},"snippets":[{"index":2,"language":"python","code":"pri)j"
      R"j(nt(1)","status":"ok","exit_code":0,"signal":null,"stdout":"1\n","stderr":"","stdout_)j"
      R"j(truncated":false,"stderr_truncated":false,"wall_ms":7,"budget":"install"},{"index":2)j"
      R"j(,"language":"python","code":"print(1)","status":"ok","exit_code":0,"signal":15,"stdo)j"
      R"j(ut":"1\n","stderr":"","stdout_truncated":false,"stderr_truncated":false,"wall_ms":7})j"
      R"j(],"environment":{"id":"env1","packages":["numpy==1"],"status":"built","build_ms":123)j"
      R"j(4},"plan":[{"index":0,"language":"python","run":true,"reason":"main code"},{"index":)j"
      R"j(1,"language":"","run":false,"reason":"no"}],"kernel":{"status":"kept","execution_cou)j"
      R"j(nt":3,"ended":false},)j"
      R"j("session_restarted":true,"limits":{"wall_time_s":10,"cpu_time_s":10,"memory_m)j"
      R"j(b":512,"processes":64,"output_bytes":1048576,"max_files":100,"file_size_mb":10,"disk)j"
      R"j(_mb":100}})j";
  BOOST_TEST(api::EncodeRunResponse(FullResponse()) == expected);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(RunCodecV1Fields)

BOOST_AUTO_TEST_CASE(snippets_become_steps_in_order) {
  api::RunRequest r;
  BOOST_TEST(!Decode(
      R"j({"snippets":[{"language":"sh","code":"echo a"},{"language":"py","code":"print(2)"}],"continue_on_error":true})j",
      &r));
  BOOST_TEST_REQUIRE(r.steps.size() == 2u);
  BOOST_TEST(r.steps[0].language->name == "bash");
  BOOST_TEST(r.steps[1].language->name == "python");
  BOOST_TEST(r.continue_on_error);
}

BOOST_AUTO_TEST_CASE(notebook_is_an_optional_bool) {
  api::RunRequest r;
  BOOST_TEST(!Decode(R"j({"markdown":"```python\n1\n```"})j", &r));
  BOOST_TEST(!r.notebook.has_value());  // unset: the markdown default applies
  BOOST_TEST(!Decode(R"j({"code":"1","language":"py","notebook":false})j", &r));
  BOOST_TEST((r.notebook == std::optional<bool>(false)));
  auto err = Decode(R"j({"code":"1","language":"py","notebook":"yes"})j");
  BOOST_TEST_REQUIRE(err.has_value());
  BOOST_TEST(err->code == "wrong_type");
  BOOST_TEST(err->field == "notebook");
}

BOOST_AUTO_TEST_CASE(snippet_errors_name_the_index) {
  auto err =
      Decode(R"j({"snippets":[{"language":"py","code":"1"},{"language":"cobol","code":"2"}]})j");
  BOOST_TEST_REQUIRE(err.has_value());
  BOOST_TEST(err->field == "snippets[1].language");
  err = Decode(R"j({"snippets":[{"language":"py"}]})j");
  BOOST_TEST(err->field == "snippets[0].code");
}

BOOST_AUTO_TEST_CASE(exactly_one_source_of_code) {
  BOOST_TEST(Decode(R"j({"language":"py","code":"1","markdown":"x"})j")->code ==
             "conflicting_fields");
  BOOST_TEST(Decode(R"j({"stdin":"x"})j")->code == "missing_field");
  BOOST_TEST(Decode(R"j({"language":"py","code":"1","block":0})j")->code == "conflicting_fields");
}

BOOST_AUTO_TEST_CASE(input_files_are_decoded) {
  api::RunRequest r;
  BOOST_TEST(!Decode(
      R"j({"language":"py","code":"1","files":[{"path":"data/in.csv","content_base64":"MSwyCg=="}]})j",
      &r));
  BOOST_TEST_REQUIRE(r.files.size() == 1u);
  BOOST_TEST(r.files[0].path == "data/in.csv");
  BOOST_TEST(r.files[0].content == "1,2\n");
}

BOOST_AUTO_TEST_CASE(hostile_input_paths_are_refused) {
  for (const char* path :
       {"../x", "/etc/passwd", "a/../../b", "a//b", "", "a\\nb", ".sandrun/main.py", "./x"}) {
    std::string body = std::string(R"j({"language":"py","code":"1","files":[{"path":")j") + path +
                       R"j(","content_base64":""}]})j";
    auto err = Decode(body);
    BOOST_TEST_REQUIRE(err.has_value(), "accepted: " << path);
    BOOST_TEST(err->field == "files[0].path");
  }
  std::string long_name(300, 'a');
  auto err = Decode(R"j({"language":"py","code":"1","files":[{"path":")j" + long_name +
                    R"j(","content_base64":""}]})j");
  BOOST_TEST(err->code == "invalid_path");
}

BOOST_AUTO_TEST_CASE(bad_base64_is_refused) {
  auto err =
      Decode(R"j({"language":"py","code":"1","files":[{"path":"a","content_base64":"!!!"}]})j");
  BOOST_TEST_REQUIRE(err.has_value());
  BOOST_TEST(err->code == "invalid_base64");
}

BOOST_AUTO_TEST_CASE(session_from_header_when_body_has_none) {
  static config::Config config = TestConfig();
  auto r = api::DecodeRunRequest(R"j({"language":"py","code":"1"})j", "", "chat-1", config);
  BOOST_TEST_REQUIRE(r.ok());
  BOOST_TEST(r->session == "chat-1");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(RunCodecRegressions)

// Red-team finding: the last of two `code` fields silently won.
BOOST_AUTO_TEST_CASE(duplicate_field_is_refused) {
  auto err = Decode(R"j({"language":"py","code":"print(1)","code":"print(2)"})j");
  BOOST_TEST_REQUIRE(err.has_value());
  BOOST_TEST(err->code == "duplicate_field");
  BOOST_TEST(err->field == "code");
}

// Red-team finding: "====" and whitespace-wrapped base64 were accepted.
BOOST_AUTO_TEST_CASE(base64_is_strict) {
  for (const char* bad : {"====", "  aGk=  ", "aGk=\\n", "a=Gk", "aG=k", "aGk*"}) {
    std::string body =
        std::string(R"j({"language":"py","code":"1","files":[{"path":"a","content_base64":")j") +
        bad + R"j("}]})j";
    auto err = Decode(body);
    BOOST_TEST_REQUIRE(err.has_value(), "accepted: " << bad);
    BOOST_TEST(err->code == "invalid_base64", bad);
  }
  api::RunRequest r;
  BOOST_TEST(!Decode(
      R"j({"language":"py","code":"1","files":[{"path":"a","content_base64":"aGk="},{"path":"b","content_base64":""}]})j",
      &r));
  BOOST_TEST(r.files[0].content == "hi");
  BOOST_TEST(r.files[1].content.empty());
}

// 16 MiB of `[` took 419 MB of daemon memory. The depth limit stops the
// parse at the 33rd `[` (offset 32: the offset says where), before the rest is read.
BOOST_AUTO_TEST_CASE(nesting_deeper_than_32_stops_the_parse_at_once) {
  auto err = Decode(std::string(16 << 20, '['));
  BOOST_TEST_REQUIRE(err.has_value());
  BOOST_TEST(err->status == 400);
  BOOST_TEST(err->code == "invalid_json");
  BOOST_TEST(err->message.find("nested deeper than 32 levels") != std::string::npos, err->message);
  BOOST_TEST(err->message.find("at byte offset 32)") != std::string::npos, err->message);
}

BOOST_AUTO_TEST_CASE(nesting_of_32_levels_parses) {
  // 32 levels in all, the outer object included: valid JSON, refused only as a wrong type.
  const std::string body = "{\"limits\":" + std::string(31, '[') + std::string(31, ']') +
                           ",\"language\":\"py\",\"code\":\"x\"}";
  auto err = Decode(body);
  BOOST_TEST_REQUIRE(err.has_value());
  BOOST_TEST(err->code == "wrong_type");
  BOOST_TEST(err->field == "limits");
}

BOOST_AUTO_TEST_CASE(more_than_10000_values_stop_the_parse) {
  std::string body = "{\"stdin\":[";
  for (int i = 0; i < 2000000; ++i) body += "0,";
  body += "0]}";
  auto err = Decode(body);
  BOOST_TEST_REQUIRE(err.has_value());
  BOOST_TEST(err->code == "invalid_json");
  BOOST_TEST(err->message.find("more than 10000 values") != std::string::npos, err->message);
  // Stopped at the 10001st value (the object, the array, then zero number 9999 at offset
  // 10 + 2 * 9998): long before the end.
  BOOST_TEST(err->message.find("at byte offset 20006)") != std::string::npos, err->message);
}

// The body's `user` silently beat the X-Sandrun-User header.
BOOST_AUTO_TEST_CASE(header_and_body_naming_different_users_are_refused) {
  auto err = Decode(R"j({"language":"py","code":"x","user":"alice"})j", nullptr, "bob");
  BOOST_TEST_REQUIRE(err.has_value());
  BOOST_TEST(err->status == 400);
  BOOST_TEST(err->code == "conflicting_fields");
  BOOST_TEST(err->field == "user");
  BOOST_TEST(err->message.find("X-Sandrun-User") != std::string::npos);
  api::RunRequest r;
  BOOST_TEST(!Decode(R"j({"language":"py","code":"x","user":"alice"})j", &r, "alice"));
  BOOST_TEST(r.user == "alice");
  BOOST_TEST(r.user_named);
}

BOOST_AUTO_TEST_CASE(header_and_body_naming_different_sessions_are_refused) {
  static config::Config config = TestConfig();
  auto r =
      api::DecodeRunRequest(R"j({"language":"py","code":"x","session":"s1"})j", "", "s2", config);
  BOOST_TEST_REQUIRE(!r.ok());
  BOOST_TEST(r.error().code == "conflicting_fields");
  BOOST_TEST(r.error().field == "session");
}

BOOST_AUTO_TEST_CASE(no_user_named_is_anonymous_and_not_named) {
  api::RunRequest r;
  BOOST_TEST(!Decode(R"j({"language":"py","code":"x"})j", &r));
  BOOST_TEST(r.user == "anonymous");
  BOOST_TEST(!r.user_named);
}

BOOST_AUTO_TEST_SUITE_END()

// The plan after the run (DESIGN.md §5): blocks that were to run but did not say so and why.
BOOST_AUTO_TEST_SUITE(PlanAfterRun)

namespace {

api::CodeStep Step(int block, const std::string& save_as = "") {
  api::CodeStep s;
  s.block_index = block;
  s.save_as = save_as;
  return s;
}

api::StepResult Ran(int block, api::RunStatus status) {
  api::StepResult r;
  r.index = block;
  r.status = status;
  return r;
}

std::vector<api::PlanEntry> Plan() {
  return {{0, "bash", true, "setup step (writes helper.py)"},
          {1, "text", false, "example output"},
          {2, "python", true, "main code"}};
}

}  // namespace

BOOST_AUTO_TEST_CASE(block_after_a_failed_block_is_not_run_and_says_why) {
  auto plan = Plan();
  run::MarkBlocksNotRun({Step(0), Step(2)}, {Ran(0, api::RunStatus::kError)},
                        api::RunStatus::kError, &plan);
  BOOST_TEST(plan[0].run);  // it ran, and failed: the step result says so
  BOOST_TEST(plan[0].reason == "setup step (writes helper.py)");
  BOOST_TEST(!plan[1].run);
  BOOST_TEST(plan[1].reason == "example output");  // never meant to run: unchanged
  BOOST_TEST(!plan[2].run);
  BOOST_TEST(plan[2].reason == "not run: block 1 failed (error); planned: main code");
}

BOOST_AUTO_TEST_CASE(every_block_ran_leaves_the_plan_as_it_was) {
  auto plan = Plan();
  run::MarkBlocksNotRun({Step(0), Step(2)},
                        {Ran(0, api::RunStatus::kOk), Ran(2, api::RunStatus::kError)},
                        api::RunStatus::kError, &plan);
  BOOST_TEST(plan[0].run);
  BOOST_TEST(plan[2].run);
  BOOST_TEST(plan[2].reason == "main code");
}

BOOST_AUTO_TEST_CASE(spent_budget_and_failed_install_line_are_named) {
  auto plan = Plan();
  run::MarkBlocksNotRun({Step(0), Step(2)}, {Ran(0, api::RunStatus::kOk)}, api::RunStatus::kTimeout,
                        &plan);
  BOOST_TEST(!plan[2].run);
  BOOST_TEST(plan[2].reason.find("not run: the run's wall-clock time was spent") == 0u,
             plan[2].reason);
  // A python block with a `!pip` line is two steps; the pip step failed, the code never ran.
  auto pip = Plan();
  run::MarkBlocksNotRun({Step(0), Step(2), Step(2)},
                        {Ran(0, api::RunStatus::kOk), Ran(2, api::RunStatus::kError)},
                        api::RunStatus::kError, &pip);
  BOOST_TEST(!pip[2].run);
  BOOST_TEST(pip[2].reason.find("not run: an install line of this block failed first") == 0u,
             pip[2].reason);
}

BOOST_AUTO_TEST_CASE(saved_blocks_are_not_program_steps) {
  std::vector<api::PlanEntry> plan = {{0, "python", false, "ran as app.py (by block 2)"},
                                      {1, "bash", true, "runs app.py"}};
  run::MarkBlocksNotRun({Step(0, "app.py"), Step(1)}, {Ran(1, api::RunStatus::kOk)},
                        api::RunStatus::kOk, &plan);
  BOOST_TEST(!plan[0].run);
  BOOST_TEST(plan[0].reason == "ran as app.py (by block 2)");
  BOOST_TEST(plan[1].run);
}

BOOST_AUTO_TEST_SUITE_END()

// Which step gets the request's stdin, and the one line for a step that waited for input and
// got none (run_steps.h; DESIGN.md Additions, "Answers as people write them").
BOOST_AUTO_TEST_SUITE(Stdin)

namespace {

const config::Language kPython = {"python", {}, "main.py", {"python3", "{file}"}};
const config::Language kBash = {"bash", {}, "main.sh", {"bash", "{file}"}};

api::CodeStep Program(const config::Language& lang, const std::string& code,
                      const std::string& reads = "") {
  api::CodeStep s;
  s.language = &lang;
  s.code = code;
  s.reads_stdin = reads;
  return s;
}

constexpr char kEof[] =
    "Traceback (most recent call last):\n  File \"x\", line 1\nEOFError: EOF when reading a "
    "line\n";

}  // namespace

BOOST_AUTO_TEST_CASE(markdown_stdin_goes_to_the_first_reading_step_else_the_last) {
  api::RunRequest run;
  run.markdown = "...";
  run.steps = {Program(kBash, "echo a"),
               Program(kPython, "x = input()", "input() on line 1 of block 2"),
               Program(kBash, "echo c")};
  BOOST_TEST(run::StdinStep(run) == 1u);
  run.steps[1].reads_stdin.clear();
  BOOST_TEST(run::StdinStep(run) == 2u);
  // `snippets` keep the last step, whatever reads.
  api::RunRequest snippets;
  snippets.steps = {Program(kPython, "x = input()"), Program(kBash, "echo b")};
  BOOST_TEST(run::StdinStep(snippets) == 1u);
}

BOOST_AUTO_TEST_CASE(no_input_note_is_one_line_naming_the_read) {
  api::RunRequest run;
  run.markdown = "...";
  run.steps = {Program(kPython, "x = input()", "input() on line 1 of block 1")};
  BOOST_TEST(run::NoInputNote(run, 0, kEof) ==
             "sandrun: the program asked for input (input() on line 1 of block 1) and got none: "
             "stdin is empty (the request has no `stdin`; send the input in `stdin`)");
  // input() that did not hit the end (caught, or not reached) says nothing.
  BOOST_TEST(run::NoInputNote(run, 0, "") == "");
  // With stdin for that step: nothing.
  run.stdin_data = "Ada\n";
  BOOST_TEST(run::NoInputNote(run, 0, kEof) == "");
  // bash `read` sees the end without an error: said whenever the step ran without stdin.
  api::RunRequest bash;
  bash.steps = {Program(kBash, "echo hi\nread -r x\necho \"$x\"\n")};
  BOOST_TEST(run::NoInputNote(bash, 0, "").find("(read on line 2) and got none") !=
             std::string::npos);
  // A `code` request whose Python ends in input()'s EOFError.
  api::RunRequest code;
  code.steps = {Program(kPython, "print(1)\nname = input('? ')\n")};
  BOOST_TEST(run::NoInputNote(code, 0, kEof).find("(input() on line 2) and got none") !=
             std::string::npos);
  // Another EOFError (pickle.load of an empty file) is no read of stdin.
  BOOST_TEST(run::NoInputNote(code, 0, "EOFError: Ran out of input\n") == "");
}

BOOST_AUTO_TEST_SUITE_END()
