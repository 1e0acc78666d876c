// POST /run through nginx: outcomes of programs (DESIGN.md §2 response, §3 limits).
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <thread>

#include "helpers.h"

namespace sandrun::integration {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Pids of host processes running `sleep <arg>`.
std::vector<pid_t> SleepProcesses(const std::string& arg) {
  std::vector<pid_t> pids;
  for (const auto& [pid, argv] : ProcessArgvs()) {
    if (argv.size() != 2 || argv[1] != arg) continue;
    const std::string& program = argv[0];
    const size_t slash = program.rfind('/');
    if ((slash == std::string::npos ? program : program.substr(slash + 1)) == "sleep") {
      pids.push_back(pid);
    }
  }
  return pids;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(RunEndToEnd)

BOOST_AUTO_TEST_CASE(python_print_is_ok) {
  auto doc = PostRun(RunRequest("python", "print(1)"));
  BOOST_TEST(Str(doc, "status") == "ok");
  BOOST_TEST(Str(doc, "stdout") == "1\n");
  BOOST_TEST(Str(doc, "stderr") == "");
  BOOST_TEST(Int(doc, "exit_code") == 0);
  BOOST_TEST(!Str(doc, "id").empty());
  BOOST_TEST((doc.HasMember("stdout_truncated") && doc["stdout_truncated"].IsFalse()));
  BOOST_TEST((doc.HasMember("usage") && doc["usage"].IsObject()));
  BOOST_TEST((doc.HasMember("limits") && doc["limits"].IsObject()));
}

BOOST_AUTO_TEST_CASE(failing_program_is_error_with_both_streams) {
  auto doc = PostRun(RunRequest("python",
                                "import sys\n"
                                "print('to stdout')\n"
                                "print('to stderr', file=sys.stderr)\n"
                                "sys.exit(3)\n"));
  BOOST_TEST(Str(doc, "status") == "error");
  BOOST_TEST(Int(doc, "exit_code") == 3);
  BOOST_TEST(Str(doc, "stdout") == "to stdout\n");
  BOOST_TEST(Str(doc, "stderr").find("to stderr") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(wall_timeout_keeps_output_so_far) {
  const auto start = std::chrono::steady_clock::now();
  auto doc = PostRun(RunRequest("python",
                                "print('before', flush=True)\n"
                                "while True:\n"
                                "    pass\n",
                                {{"wall_time_s", 2}}));
  BOOST_TEST(Str(doc, "status") == "timeout");
  BOOST_TEST(Str(doc, "stdout").find("before") != std::string::npos);
  BOOST_TEST(doc.HasMember("stderr"));
  BOOST_TEST(SecondsSince(start) < 30.0);
}

BOOST_AUTO_TEST_CASE(background_process_does_not_outlive_the_run) {
  BOOST_REQUIRE_MESSAGE(SleepProcesses("100").empty(),
                        "a `sleep 100` is already running on this host; cannot tell");
  const auto start = std::chrono::steady_clock::now();
  auto doc = PostRun(RunRequest("bash", "sleep 100 &\necho started\n"));
  BOOST_TEST(Str(doc, "status") == "ok");
  BOOST_TEST(Str(doc, "stdout") == "started\n");
  BOOST_TEST(SecondsSince(start) < 30.0);
  // The sandbox is gone when the answer is sent; allow the kernel a moment to reap.
  std::vector<pid_t> left = SleepProcesses("100");
  for (int i = 0; i < 50 && !left.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    left = SleepProcesses("100");
  }
  BOOST_TEST(left.empty(), "`sleep 100` from the run still runs on the host");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
