// The install budget buys pip's fetching from the index, never a program's time: suite
// InstallBudget runs with install_wall_time_s 30 (tests/integration/CMakeLists.txt) and no
// network, and every case's own limits are a few seconds. Code a run placed in the workspace
// (a .pth in the user site, ./pip, a project directory's build backend, a requirements file
// naming one) must be stopped at the run's limits, not the install budget's 30 s.
#include <openssl/evp.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <boost/test/unit_test.hpp>
#include <chrono>

#include "helpers.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

using Clock = std::chrono::steady_clock;

// One entry of a request's `files`.
std::string File(const std::string& path, const std::string& content) {
  std::string b64(4 * ((content.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(b64.data()),
                                reinterpret_cast<const unsigned char*>(content.data()),
                                static_cast<int>(content.size()));
  b64.resize(static_cast<size_t>(n));
  return R"({"path": )" + Q(path) + R"(, "content_base64": ")" + b64 + "\"}";
}

std::string Output(const rapidjson::Document& doc) {
  return Str(doc, "stdout") + Str(doc, "stderr");
}

int64_t SecondsSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start).count();
}

// Python that writes a .pth into the user site (where pip's --user installs go, and which
// every Python of the run reads at start) running `line` at every interpreter start.
std::string PlantPth(const std::string& line) {
  return "import os, site\n"
         "d = site.getusersitepackages()\n"
         "os.makedirs(d, exist_ok=True)\n"
         "open(os.path.join(d, 'zz-planted.pth'), 'w').write(" +
         Q(line + "\n") + ")\nprint('planted')\n";
}

// A project directory whose in-tree build backend sleeps when pip imports it (no setuptools
// or index needed: `requires = []`).
std::string ProjectFiles() {
  return File("dir/pyproject.toml",
              "[build-system]\nrequires = []\nbuild-backend = \"backend\"\nbackend-path = "
              "[\".\"]\n") +
         ", " +
         File("dir/backend.py",
              "import time\nprint('BACKEND-RAN', flush=True)\ntime.sleep(3600)\n");
}

// The one block of `doc`'s plan at `index`.
std::string Reason(const rapidjson::Document& doc, size_t index) {
  BOOST_TEST_REQUIRE(doc.HasMember("plan"));
  BOOST_TEST_REQUIRE(doc["plan"].Size() > index);
  return Str(doc["plan"][static_cast<rapidjson::SizeType>(index)], "reason");
}

constexpr char kLimits[] = R"("limits": {"wall_time_s": 4, "cpu_time_s": 4})";

}  // namespace

BOOST_AUTO_TEST_SUITE(InstallBudget)

// A .pth placed by the run, then `pip install` of anything: pip does not read the user site
// (python3 -I), so the step is pip's alone; the .pth runs when the program's Python starts,
// on the program's limits.
BOOST_AUTO_TEST_CASE(a_pth_in_the_user_site_never_runs_on_the_install_budget) {
  for (const auto& [line, limit] :
       {std::pair<std::string, std::string>{"import sys, time; print('PTH-RAN', flush=True); "
                                            "time.sleep(3600)",
                                            "wall-clock time limit of 4 s"},
        {"import sys; print('PTH-RAN', flush=True); exec('while True: pass')",
         "CPU time limit of 2 s"}}) {
    const std::string limits = limit.find("CPU") != std::string::npos
                                   ? R"("limits": {"wall_time_s": 8, "cpu_time_s": 2})"
                                   : kLimits;
    const auto start = Clock::now();
    auto doc = PostRun(R"({"snippets": [{"language": "python", "code": )" + Q(PlantPth(line)) +
                       R"(}, {"language": "bash", "code": "pip install pip"},)"
                       R"( {"language": "python", "code": )" +
                       Q("print('after')") + "}], " + limits + "}");
    const int64_t took = SecondsSince(start);
    BOOST_TEST_REQUIRE(doc.HasMember("snippets"), Output(doc));
    const auto& steps = doc["snippets"];
    BOOST_TEST_REQUIRE(steps.Size() == 3u, Output(doc));
    BOOST_TEST(Str(steps[1], "budget") == "install");
    BOOST_TEST(Str(steps[1], "status") == "ok", Output(doc));
    BOOST_TEST(
        Str(steps[1], "stdout").find("Requirement already satisfied: pip") != std::string::npos,
        Output(doc));
    BOOST_TEST(Str(steps[1], "stdout").find("PTH-RAN") == std::string::npos, Output(doc));
    // The program's Python reads the .pth, and the program's limit stops it.
    BOOST_TEST(Str(steps[2], "budget") == "program");
    BOOST_TEST(Str(steps[2], "status") == "timeout", Output(doc));
    BOOST_TEST(Str(steps[2], "stdout").find("PTH-RAN") != std::string::npos, Output(doc));
    BOOST_TEST(Str(doc, "stderr").find(limit) != std::string::npos, Output(doc));
    BOOST_TEST(took < 25, took << " s: " << Output(doc));  // the install budget is 30 s
    BOOST_TEST_MESSAGE(limit << ": the run took " << took << " s");
  }
}

// The same in a notebook run (two Python blocks: one kernel for the answer): the install cell
// runs the daemon's script under env -i, so pip reads neither the kernel's environment nor the
// user site; and after a program cell it gets no more wall time than a program cell.
BOOST_AUTO_TEST_CASE(an_install_cell_of_a_notebook_run_is_pips_alone) {
  const std::string md = "```python\n" +
                         PlantPth(
                             "import time; print('PTH-RAN', flush=True); "
                             "time.sleep(3600)") +
                         "```\n\n```bash\npip install pip\n```\n\n"
                         "```python\nprint('after')\n```\n";
  const auto start = Clock::now();
  auto doc = PostRun(R"({"markdown": )" + Q(md) + ", " + kLimits + "}");
  const int64_t took = SecondsSince(start);
  BOOST_TEST_REQUIRE(doc.HasMember("snippets"), Output(doc));
  const auto& steps = doc["snippets"];
  BOOST_TEST_REQUIRE(steps.Size() == 3u, Output(doc));
  BOOST_TEST(Str(steps[1], "status") == "ok", Output(doc));
  BOOST_TEST(
      Str(steps[1], "stdout").find("Requirement already satisfied: pip") != std::string::npos,
      Output(doc));
  BOOST_TEST(Output(doc).find("PTH-RAN") == std::string::npos, Output(doc));
  BOOST_TEST(Str(steps[2], "stdout") == "after\n", Output(doc));
  BOOST_TEST(Str(doc, "status") == "ok", Output(doc));
  BOOST_TEST(took < 25, took << " s: " << Output(doc));  // the install budget is 30 s
}

// `./pip install x`: the workspace's pip is the run's program.
BOOST_AUTO_TEST_CASE(a_pip_of_the_workspace_runs_on_the_programs_budget) {
  const std::string md =
      "```python\nimport os\nopen('pip', 'w').write('#!/bin/sh\\necho FAKE-PIP\\nsleep 3600\\n')\n"
      "os.chmod('pip', 0o755)\n```\n\n```bash\n./pip install requests\n```\n";
  const auto start = Clock::now();
  auto doc = PostRun(R"({"markdown": )" + Q(md) + ", " + kLimits + "}");
  const int64_t took = SecondsSince(start);
  const std::string reason = Reason(doc, 1);
  BOOST_TEST(reason.find("run as a program, on the run's limits") != std::string::npos, reason);
  BOOST_TEST(reason.find("'./pip', not the system's pip") != std::string::npos, reason);
  BOOST_TEST_REQUIRE(doc.HasMember("snippets"), Output(doc));
  BOOST_TEST(Str(doc["snippets"][1], "budget") == "program");
  BOOST_TEST(Str(doc, "status") == "timeout", Output(doc));
  BOOST_TEST(Str(doc, "stdout").find("FAKE-PIP") != std::string::npos, Output(doc));
  BOOST_TEST(Str(doc, "stderr").find("wall-clock time limit of 4 s") != std::string::npos,
             Output(doc));
  BOOST_TEST(took < 25, took << " s");
}

// `pip install ./dir` and `pip install -r file` naming it run the project's build backend:
// the run's code, on the run's limits.
BOOST_AUTO_TEST_CASE(a_path_or_a_requirements_file_runs_on_the_programs_budget) {
  const std::string files =
      R"("files": [)" + ProjectFiles() + ", " + File("req.txt", "./dir\n") + "], ";
  for (const char* command : {"pip install ./dir", "pip install -r req.txt"}) {
    const auto start = Clock::now();
    auto doc = PostRun(R"({"snippets": [{"language": "bash", "code": )" + Q(command) +
                       R"(}, {"language": "python", "code": )" + Q("print(1)") + "}], " + files +
                       kLimits + "}");
    const int64_t took = SecondsSince(start);
    BOOST_TEST_REQUIRE(doc.HasMember("snippets"), Output(doc));
    BOOST_TEST(Str(doc["snippets"][0], "budget") == "program", command);
    BOOST_TEST(Str(doc, "status") == "timeout", command << ": " << Output(doc));
    BOOST_TEST(Str(doc, "stderr").find("wall-clock time limit of 4 s") != std::string::npos,
               command << ": " << Output(doc));
    BOOST_TEST(took < 25, command << ": " << took << " s");
  }
  // In a message, the plan says why the block is a program.
  auto doc = PostRun(R"({"markdown": )" + Q("```bash\npip install ./dir\n```\n") + ", " + files +
                     kLimits + "}");
  const std::string reason = Reason(doc, 0);
  BOOST_TEST(reason.find("run as a program, on the run's limits") != std::string::npos, reason);
  BOOST_TEST(reason.find("'./dir' does not start with a package name") != std::string::npos,
             reason);
  BOOST_TEST(Str(doc, "status") == "timeout", Output(doc));
}

// A pip.py or pip/ in the workspace (the working directory of the step, and on PYTHONPATH
// for programs) does not stand in for pip in an install step.
BOOST_AUTO_TEST_CASE(a_pip_module_in_the_workspace_does_not_shadow_pip) {
  std::string files;
  for (const auto& [path, marker] :
       {std::pair<std::string, std::string>{"pip/__init__.py", "SHADOW-PIP"},
        {"pip/__main__.py", "SHADOW-PIP-MAIN"},
        {"usercustomize.py", "USERCUSTOMIZE"},
        {"sitecustomize.py", "SITECUSTOMIZE"}}) {
    files += std::string(files.empty() ? "" : ", ") + File(path, "print('" + marker + "')\n");
  }
  auto doc = PostRun(R"({"files": [)" + files +
                     R"(], "language": "bash", "code": "python3 -m pip install --quiet pip"})");
  BOOST_TEST(Str(doc, "status") == "ok", Output(doc));
  for (const char* marker : {"SHADOW-PIP", "USERCUSTOMIZE", "SITECUSTOMIZE"}) {
    BOOST_TEST(Output(doc).find(marker) == std::string::npos, marker << ": " << Output(doc));
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
