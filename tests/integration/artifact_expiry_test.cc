// Expiry of generated files (DESIGN.md §4) through the real stack: a link never outlives its
// file, and the daemon's janitor deletes expired runs and the directories they leave empty,
// also once at start-up.
//
// Its ctest entry runs the stack with artifact_max_age_s 4 and janitor_interval_s 1. No check
// here is about how long anything takes: the test only polls, within a generous bound, for
// the janitor to have done its work, and checks the order of events.
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "artifact_helpers.h"
#include "helpers.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

// How long to wait at most for the janitor: far past max age + interval.
constexpr int kPollBoundS = 60;

}  // namespace

BOOST_AUTO_TEST_SUITE(ArtifactExpiry)

BOOST_AUTO_TEST_CASE(link_expires_no_later_than_its_file_and_the_janitor_removes_it) {
  Stack& stack = Stack::Get();
  const int64_t max_age = stack.ConfigInt("artifact_max_age_s");
  BOOST_REQUIRE(max_age == 4);
  BOOST_REQUIRE(stack.ConfigInt("link_ttl_s") > max_age);
  const int64_t before = NowEpochS();
  auto doc = PostRun(PythonRequest("open('t.txt', 'w').write('short-lived')\n", "expiry"));
  const int64_t after = NowEpochS();
  BOOST_REQUIRE(ListSize(doc, "files") == 1);
  const rapidjson::Value& file = doc["files"][0];
  const int64_t expires_at = Int(file, "expires_at");
  // The file's age bounds the link, not link_ttl_s.
  BOOST_TEST(expires_at >= before + max_age);
  BOOST_TEST(expires_at <= after + max_age);
  const Link link = ParseLink(Str(file, "url"));
  BOOST_TEST(link.expires == expires_at);

  // /files/<user-dir>/<run-id>/t.txt -> the run and user directories on disk.
  const std::string rel = PercentDecode(link.path.substr(std::string("/files/").size()));
  const std::string user_dir = stack.artifacts_dir() + "/" + rel.substr(0, rel.find('/'));
  const std::string run_dir = stack.artifacts_dir() + "/" + rel.substr(0, rel.rfind('/'));
  BOOST_TEST(std::filesystem::exists(run_dir + "/t.txt"));

  // While the link is valid the file is there; the janitor removes it only after that.
  bool served_while_valid = false;
  int64_t removed_at = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kPollBoundS);
  while (std::chrono::steady_clock::now() < deadline) {
    const int64_t now = NowEpochS();
    const bool exists = std::filesystem::exists(run_dir);
    if (now < expires_at - 1) {  // a second of slack for the clocks' rounding
      BOOST_TEST(exists, "run removed at " << now << ", before its link expired at " << expires_at);
      const HttpResponse response = Get(LinkPathAndQuery(link));
      BOOST_TEST(response.status == 200);
      served_while_valid |= response.status == 200 && response.body == "short-lived";
    }
    if (!exists) {
      removed_at = now;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  BOOST_TEST(served_while_valid);
  BOOST_REQUIRE_MESSAGE(
      removed_at != 0, "the janitor did not remove the expired run within " << kPollBoundS << " s");
  BOOST_TEST(removed_at >= expires_at - 1, "a link outlived its file");
  // The user had nothing else: the directory goes too (possibly one sweep later).
  const auto dir_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kPollBoundS);
  while (std::filesystem::exists(user_dir) && std::chrono::steady_clock::now() < dir_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  BOOST_TEST(!std::filesystem::exists(user_dir));
  // The link now answers "expired", as any link past its time does.
  const HttpResponse gone = Get(LinkPathAndQuery(link));
  BOOST_TEST(gone.status == 410);
  BOOST_TEST(ParseServiceError(gone.body).code == "link_expired");
  // Nothing half-deleted is left behind.
  for (const auto& entry : std::filesystem::directory_iterator(stack.artifacts_dir())) {
    BOOST_TEST(entry.path().filename().string().rfind(".", 0) != 0u, entry.path());
  }
}

BOOST_AUTO_TEST_CASE(janitor_sweeps_at_start_up_before_serving) {
  // The daemon logs its start-up sweep before it listens (src/main.cc).
  const std::string log = ReadFile(Stack::Get().state_dir() + "/logs/sandrund.log");
  const size_t sweep = log.find("sandrund: janitor: ");
  const size_t listening = log.find("sandrund: listening on ");
  BOOST_TEST_REQUIRE(sweep != std::string::npos, log);
  BOOST_TEST_REQUIRE(listening != std::string::npos, log);
  BOOST_TEST(sweep < listening);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
