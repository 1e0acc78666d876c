// POST /run through Service::Handle with a fake SandboxRunner and a RunTmpfs that mounts
// nothing: the whole stateless pipeline (decode, plan, admission, workspace, steps, export,
// JSON) runs without root, namespaces or a sandbox. The fake records each step's
// SandboxSpec and answers with canned SandboxResults or errors.
#define BOOST_TEST_MODULE run_handler
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <stdlib.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>

#include "api/service.h"

using namespace sandrun;
using sandbox::RunOutcome;
using sandbox::SandboxResult;

namespace {

// One step's canned answer: a result, or a sandbox that could not be built. `act` runs
// first, as the program would (it may write into the workspace).
struct Canned {
  Result<SandboxResult> result;
  std::function<void(const sandbox::SandboxSpec&)> act;
};

class FakeRunner : public sandbox::SandboxRunner {
 public:
  using SandboxRunner::Run;
  using SandboxRunner::Start;

  void Answer(Canned canned) { answers_.push_back(std::move(canned)); }
  // An answer of a program that exited with `code` printing `out`.
  void Exits(int code, const std::string& out = "") {
    SandboxResult r;
    r.outcome = RunOutcome::kExited;
    r.exit_code = code;
    r.stdout_text = out;
    r.wall_ms = 5;
    r.cpu_ms = 3;
    Answer({r, nullptr});
  }
  const std::vector<sandbox::SandboxSpec>& specs() const { return specs_; }

  Result<SandboxResult> Run(const sandbox::SandboxSpec& spec,
                            sandbox::RunCgroup* /*cgroup*/) const override {
    std::lock_guard lock(mu_);
    specs_.push_back(spec);
    if (answers_.empty()) return MakeError(ErrorKind::kSystem, "fake: no answer left");
    Canned next = std::move(answers_.front());
    answers_.pop_front();
    if (next.act) next.act(spec);
    return next.result;
  }
  // Records the limits asked for and makes none, as on a host with require_cgroups = false.
  Result<std::unique_ptr<sandbox::RunCgroup>> CreateCgroup(
      const std::string& /*run_id*/, const sandbox::CgroupLimits& limits) const override {
    std::lock_guard lock(mu_);
    cgroups_.push_back(limits);
    return std::unique_ptr<sandbox::RunCgroup>();
  }
  std::vector<sandbox::CgroupLimits> made_cgroups() const {
    std::lock_guard lock(mu_);
    return cgroups_;
  }
  Result<sandbox::HelperResult> RunHelper(const std::vector<std::string>& /*argv*/,
                                          sandbox::RunCgroup* /*cgroup*/) const override {
    return MakeError(ErrorKind::kSystem, "fake: no helpers");
  }
  Result<std::unique_ptr<sandbox::LiveSandbox>> Start(
      const sandbox::SandboxSpec& /*spec*/,
      std::unique_ptr<sandbox::RunCgroup> /*cgroup*/) const override {
    return MakeError(ErrorKind::kSystem, "fake: no live sandboxes");
  }
  // No warm pool here: its sandboxes are never started (StartWarmPool is not called).
  Result<std::unique_ptr<sandbox::WaitingSandbox>> StartWaiting(
      const sandbox::SandboxSpec& /*spec*/, sandbox::RunCgroup* /*cgroup*/) const override {
    return MakeError(ErrorKind::kSystem, "fake: no waiting sandboxes");
  }
  Result<sandbox::SandboxResult> RunWaiting(sandbox::WaitingSandbox& /*sandbox*/,
                                            const std::string& /*start_line*/,
                                            const sandbox::SandboxSpec& /*spec*/) const override {
    return MakeError(ErrorKind::kSystem, "fake: no waiting sandboxes");
  }
  const sandbox::CgroupManager* cgroups() const override { return nullptr; }

 private:
  mutable std::mutex mu_;
  mutable std::deque<Canned> answers_;
  mutable std::vector<sandbox::SandboxSpec> specs_;
  mutable std::vector<sandbox::CgroupLimits> cgroups_;
};

// The run's directory stays a plain directory: no mount, so no root needed.
class NoTmpfs : public run::RunTmpfs {
 public:
  Status Mount(const std::string& /*dir*/, uint64_t /*bytes*/) const override { return OkStatus(); }
  Status Unmount(const std::string& /*dir*/) const override { return OkStatus(); }
};

// A fresh state directory, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const char* base = getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr ? base : "/tmp") + "/sandrun-handler-XXXXXX";
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

config::Config TestConfig(const std::string& state) {
  config::Config c;
  c.state_dir = state;
  c.runs_dir = state + "/runs";
  c.artifacts_dir = state + "/artifacts";
  c.environments_dir = state + "/environments";
  c.link_secret = "test-link-secret";
  c.public_url = "http://127.0.0.1:8080";
  c.allow_anonymous = true;
  c.max_concurrent_runs = 2;
  c.session_max_waiters_total = 1;
  // Whoever runs the test owns the run's files (chown to oneself needs no root).
  c.sandbox_uid = ::getuid();
  c.sandbox_gid = ::getgid();
  c.languages = {{"python", {"py"}, "main.py", {"/usr/bin/python3", "{file}"}},
                 {"bash", {"sh"}, "main.sh", {"/bin/bash", "{file}"}}};
  std::filesystem::create_directories(c.runs_dir);
  std::filesystem::create_directories(c.artifacts_dir);
  return c;
}

struct Fixture {
  TempDir dir;
  config::Config config = TestConfig(dir.path());
  FakeRunner runner;
  NoTmpfs tmpfs;
  api::Service service{config, &runner, "", tmpfs};

  api::HttpResponse Post(const std::string& body) {
    api::HttpRequest request;
    request.method = "POST";
    request.path = "/run";
    request.body = body;
    request.request_id = "test";
    request.headers["content-type"] = "application/json";
    return service.Handle(request);
  }
  static rapidjson::Document Json(const api::HttpResponse& response) {
    rapidjson::Document doc;
    doc.Parse(response.body.c_str());
    BOOST_TEST_REQUIRE(!doc.HasParseError(), response.body);
    return doc;
  }
};

std::string Str(const rapidjson::Value& v) {
  return v.IsString() ? v.GetString() : "<not a string>";
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(RunHandler, Fixture)

BOOST_AUTO_TEST_CASE(python_run_passes_status_exit_code_and_stdout_through) {
  SandboxResult r;
  r.exit_code = 0;
  r.stdout_text = "hello\n";
  std::string program;
  runner.Answer({r, [&program](const sandbox::SandboxSpec& spec) {
                   std::ifstream in(spec.workspace_dir + "/.sandrun/main.py");
                   program.assign(std::istreambuf_iterator<char>(in), {});
                 }});
  api::HttpResponse http = Post(R"j({"language":"python","code":"print('hello')"})j");
  BOOST_TEST(http.status == 200, http.body);
  rapidjson::Document doc = Json(http);
  BOOST_TEST(Str(doc["status"]) == "ok");
  BOOST_TEST(doc["exit_code"].GetInt() == 0);
  BOOST_TEST(Str(doc["stdout"]) == "hello\n");
  BOOST_TEST(!doc.HasMember("snippets"));
  BOOST_TEST_REQUIRE(runner.specs().size() == 1u);
  const sandbox::SandboxSpec& spec = runner.specs()[0];
  BOOST_TEST(
      spec.argv == (std::vector<std::string>{"/usr/bin/python3", "/home/user/.sandrun/main.py"}),
      boost::test_tools::per_element());
  // The program file was in the workspace before the program ran.
  BOOST_TEST(program == "print('hello')");
  // The run's directory goes once the response has been sent (HttpResponse::after_send).
  BOOST_TEST(!std::filesystem::is_empty(config.runs_dir));
  http.after_send.reset();
  BOOST_TEST(std::filesystem::is_empty(config.runs_dir));
}

BOOST_AUTO_TEST_CASE(spec_carries_the_requests_limits) {
  runner.Exits(0);
  const api::HttpResponse http = Post(
      R"j({"language":"python","code":"pass","limits":{"wall_time_s":7,"cpu_time_s":3,"memory_mb":128,"processes":9,"output_bytes":50000}})j");
  BOOST_TEST(http.status == 200, http.body);
  BOOST_TEST_REQUIRE(runner.specs().size() == 1u);
  const sandbox::SandboxLimits& limits = runner.specs()[0].limits;
  BOOST_TEST(limits.wall_time_ms == 7000);
  BOOST_TEST(limits.cpu_time_s == 3);
  BOOST_TEST(limits.cgroup.memory_bytes == (uint64_t{128} << 20));
  BOOST_TEST(limits.cgroup.processes == 9);
  BOOST_TEST(limits.output_bytes == 50000u);
  BOOST_TEST(runner.specs()[0].host_uid == ::getuid());
  BOOST_TEST(!runner.specs()[0].network.enabled);
  // The run's one cgroup (made before the workspace is filled) has the same memory and pids.
  const std::vector<sandbox::CgroupLimits> cgroups = runner.made_cgroups();
  BOOST_TEST_REQUIRE(cgroups.size() == 1u);
  BOOST_TEST(cgroups[0].memory_bytes == (uint64_t{128} << 20));
  BOOST_TEST(cgroups[0].processes == 9);
  BOOST_TEST(!cgroups[0].freezable);
}

BOOST_AUTO_TEST_CASE(sandbox_failure_is_500_sandbox_error) {
  runner.Answer({MakeError(ErrorKind::kSystem, "clone: EPERM"), nullptr});
  const api::HttpResponse http = Post(R"j({"language":"bash","code":"echo hi"})j");
  BOOST_TEST(http.status == 500);
  rapidjson::Document doc = Json(http);
  BOOST_TEST(Str(doc["error"]["code"]) == "sandbox_error");
  BOOST_TEST(Str(doc["error"]["message"]).find("clone: EPERM") != std::string::npos, http.body);
}

BOOST_AUTO_TEST_CASE(wall_timeout_is_status_timeout_with_a_note) {
  SandboxResult r;
  r.outcome = RunOutcome::kWallTimeout;
  r.signal = 9;
  r.wall_ms = 2000;
  runner.Answer({r, nullptr});
  const api::HttpResponse http =
      Post(R"j({"language":"python","code":"while True: pass","limits":{"wall_time_s":2}})j");
  BOOST_TEST(http.status == 200, http.body);
  rapidjson::Document doc = Json(http);
  BOOST_TEST(Str(doc["status"]) == "timeout");
  BOOST_TEST(Str(doc["stderr"]).find("wall-clock time limit of 2 s reached") != std::string::npos,
             http.body);
}

BOOST_AUTO_TEST_CASE(a_failed_step_stops_the_next_without_continue_on_error) {
  runner.Exits(3, "first\n");
  runner.Exits(0, "second\n");
  const api::HttpResponse http = Post(
      R"j({"snippets":[{"language":"bash","code":"exit 3"},{"language":"bash","code":"echo second"}]})j");
  BOOST_TEST(http.status == 200, http.body);
  rapidjson::Document doc = Json(http);
  BOOST_TEST(Str(doc["status"]) == "error");
  BOOST_TEST(doc["exit_code"].GetInt() == 3);
  BOOST_TEST_REQUIRE(doc["snippets"].IsArray());
  BOOST_TEST(doc["snippets"].Size() == 1u);
  BOOST_TEST(runner.specs().size() == 1u);
  // Several programs: each in its own directory of .sandrun.
  BOOST_TEST(runner.specs()[0].argv.back() == "/home/user/.sandrun/0/main.sh");
}

BOOST_AUTO_TEST_CASE(continue_on_error_runs_every_step_and_keeps_the_first_failure) {
  runner.Exits(3, "first\n");
  runner.Exits(0, "second\n");
  const api::HttpResponse http = Post(
      R"j({"snippets":[{"language":"bash","code":"exit 3"},{"language":"bash","code":"echo second"}],"continue_on_error":true})j");
  BOOST_TEST(http.status == 200, http.body);
  rapidjson::Document doc = Json(http);
  BOOST_TEST(Str(doc["status"]) == "error");
  BOOST_TEST(doc["exit_code"].GetInt() == 3);
  BOOST_TEST_REQUIRE(doc["snippets"].IsArray());
  BOOST_TEST_REQUIRE(doc["snippets"].Size() == 2u);
  BOOST_TEST(Str(doc["snippets"][1]["status"]) == "ok");
  BOOST_TEST(Str(doc["stdout"]).find("second") != std::string::npos, http.body);
  BOOST_TEST_REQUIRE(runner.specs().size() == 2u);
  BOOST_TEST(runner.specs()[1].argv.back() == "/home/user/.sandrun/1/main.sh");
}

BOOST_AUTO_TEST_CASE(stdin_goes_to_the_last_step_only) {
  runner.Exits(0);
  runner.Exits(0);
  const api::HttpResponse http = Post(
      R"j({"snippets":[{"language":"bash","code":"true"},{"language":"bash","code":"cat"}],"stdin":"in"})j");
  BOOST_TEST(http.status == 200, http.body);
  BOOST_TEST_REQUIRE(runner.specs().size() == 2u);
  BOOST_TEST(runner.specs()[0].stdin_data.empty());
  BOOST_TEST(runner.specs()[1].stdin_data == "in");
}

BOOST_AUTO_TEST_CASE(a_file_the_program_writes_is_published) {
  SandboxResult r;
  r.exit_code = 0;
  runner.Answer({r, [](const sandbox::SandboxSpec& spec) {
                   std::ofstream(spec.workspace_dir + "/out.txt") << "made\n";
                 }});
  const api::HttpResponse http = Post(R"j({"language":"bash","code":"echo made > out.txt"})j");
  BOOST_TEST(http.status == 200, http.body);
  rapidjson::Document doc = Json(http);
  BOOST_TEST(Str(doc["status"]) == "ok");
  BOOST_TEST_REQUIRE(doc["files"].IsArray());
  BOOST_TEST_REQUIRE(doc["files"].Size() == 1u, http.body);
  BOOST_TEST(Str(doc["files"][0]["path"]) == "out.txt");
}

BOOST_AUTO_TEST_CASE(saved_markdown_block_is_written_not_run) {
  std::string saved;
  SandboxResult r;
  r.exit_code = 0;
  runner.Answer({r, [&saved](const sandbox::SandboxSpec& spec) {
                   std::ifstream in(spec.workspace_dir + "/backup.sh");
                   saved.assign(std::istreambuf_iterator<char>(in), {});
                 }});
  rapidjson::Document body;
  body.SetObject();
  const std::string markdown =
      "A script:\n\n```bash title=\"backup.sh\"\necho backup done\n```\n\n"
      "Make it executable and run it:\n\n```bash\nchmod +x backup.sh\n./backup.sh\n```\n";
  body.AddMember("markdown", rapidjson::Value(markdown.c_str(), body.GetAllocator()),
                 body.GetAllocator());
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  body.Accept(writer);
  const api::HttpResponse http = Post(buffer.GetString());
  BOOST_TEST(http.status == 200, http.body);
  // One program ran (block 1); the saved block was in the workspace before it.
  BOOST_TEST_REQUIRE(runner.specs().size() == 1u);
  BOOST_TEST(saved == "echo backup done\n");
  // The program keeps its place among the planned steps: .sandrun/1/.
  BOOST_TEST(runner.specs()[0].argv.back() == "/home/user/.sandrun/1/main.sh");
  rapidjson::Document doc = Json(http);
  BOOST_TEST_REQUIRE(doc["snippets"].Size() == 1u);
  BOOST_TEST(doc["snippets"][0]["index"].GetInt() == 1);
  BOOST_TEST(!doc["plan"][0]["run"].GetBool());
}

BOOST_AUTO_TEST_CASE(install_step_runs_on_the_install_budget) {
  runner.Exits(0);
  runner.Exits(0);
  const api::HttpResponse http = Post(
      R"j({"snippets":[{"language":"bash","code":"pip install requests"},{"language":"python","code":"pass"}],"limits":{"wall_time_s":4}})j");
  BOOST_TEST(http.status == 200, http.body);
  BOOST_TEST_REQUIRE(runner.specs().size() == 2u);
  const sandbox::SandboxLimits& install = runner.specs()[0].limits;
  BOOST_TEST(install.wall_time_ms == config.install_wall_time_s * 1000);
  BOOST_TEST(install.cpu_time_s == config.install_wall_time_s);
  BOOST_TEST(install.disk_bytes == static_cast<uint64_t>(config.install_disk_mb) << 20);
  // The program's wall time is the request's, less what earlier program steps used (none).
  BOOST_TEST(runner.specs()[1].limits.wall_time_ms == 4000);
  // The install budget is time and disk: the run's cgroup keeps the request's memory and pids.
  const std::vector<sandbox::CgroupLimits> cgroups = runner.made_cgroups();
  BOOST_TEST_REQUIRE(cgroups.size() == 1u);
  BOOST_TEST(cgroups[0].memory_bytes == install.cgroup.memory_bytes);
  BOOST_TEST(cgroups[0].processes == install.cgroup.processes);
  rapidjson::Document doc = Json(http);
  BOOST_TEST(Str(doc["snippets"][0]["budget"]) == "install");
  BOOST_TEST(Str(doc["snippets"][1]["budget"]) == "program");
}

// A notebook run's traceback names the cells of the run as the user counts the blocks.
BOOST_AUTO_TEST_CASE(name_cells_names_the_runs_cells_as_blocks) {
  const std::map<int, std::string> blocks = {{1, "block 1"}, {2, "block 3"}};
  BOOST_TEST(run::NameCells("Cell In[2], line 3\n----> 3 x\n", blocks) ==
             "block 3, line 3\n----> 3 x\n");
  BOOST_TEST(run::NameCells("Cell In[1], line 2, in f()\nCell In[2]\n", blocks) ==
             "block 1, line 2, in f()\nblock 3\n");
  // IPython 8.5's form, with a space.
  BOOST_TEST(run::NameCells("Cell In [2], line 3\n", blocks) == "block 3, line 3\n");
  BOOST_TEST(run::NameCells("Cell In [], line 3", blocks) == "Cell In [], line 3");
  // Cells of earlier runs, and text that only looks like a cell, are left as they are.
  BOOST_TEST(run::NameCells("Cell In[7], line 1", blocks) == "Cell In[7], line 1");
  BOOST_TEST(run::NameCells("Cell In[x] Cell In[", blocks) == "Cell In[x] Cell In[");
  BOOST_TEST(run::NameCells("Cell In[99999999999999999], line 1", blocks) ==
             "Cell In[99999999999999999], line 1");
  BOOST_TEST(run::NameCells("", blocks) == "");
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// A LineWriter that records nothing: WantsStream only asks whether there is one.
struct NullWriter : run::LineWriter {
  bool Begin() override { return true; }
  bool Write(const std::string&) override { return true; }
  bool Connected() override { return true; }
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_streamed_run_is_asked_for_with_accept_ndjson) {
  NullWriter writer;
  api::HttpRequest request;
  request.stream = &writer;
  auto wants = [&](const std::string& accept) {
    request.headers["accept"] = accept;
    return api::WantsStream(request);
  };
  BOOST_TEST(wants("application/x-ndjson"));
  BOOST_TEST(wants("Application/X-NDJSON; q=1"));
  BOOST_TEST(wants("application/json, application/x-ndjson;q=0.9"));
  BOOST_TEST(!wants("application/json"));
  BOOST_TEST(!wants("*/*"));
  BOOST_TEST(!wants("application/x-ndjsonx"));
  BOOST_TEST(!wants(""));
  request.headers["accept"] = "application/x-ndjson";
  request.stream = nullptr;  // a server that cannot stream (the self-test)
  BOOST_TEST(!api::WantsStream(request));
}
