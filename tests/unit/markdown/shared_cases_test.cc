// Every case of ../shared/cases/messages.jsonl (beside the repository, as in CI) planned
// here: the plan-related parts of `expect`. Keys that need a live run (`output_contains`,
// `exit_code`, `files_exported`, `max_total_file_bytes`, `must`/`must_not` about the workspace)
// belong to the integration test of the whole stack.
//   - status: a run status ("ok", "error", ...) means the message has code to run; "http_4xx"
//     alone means it has none (no_runnable_code or bad_block);
//   - `block` in the request: only that block runs;
//   - "if only one block is run, say which one and that the others were skipped": planned
//     with each `block` in turn, the plan says which block was selected and that the others
//     were not;
//   - kPlanExpectations: the expected plan of the cases known when this was written.
#define BOOST_TEST_MODULE markdown_shared_cases
#include <boost/test/unit_test.hpp>
#include <fstream>
#include <map>

#include "corpus.h"
#include "markdown/run_plan.h"

namespace sandrun::markdown {
namespace {

using testing::CheckExpected;
using testing::CheckInvariants;
using testing::ResultToJson;

const std::string kCasesFile = SANDRUN_SHARED_MESSAGES;

const std::map<std::string, std::string>& PlanExpectations() {
  static const std::map<std::string, std::string> kPlans = {
      {"env-05-multiple-code-blocks",
       R"json({"plan": [{"language": "bash", "run": true,
                     "reason": "setup step (writes helper.py)"},
                    {"language": "python", "run": true, "reason": "main code"}],
           "steps": [{"block": 0, "kind": "setup", "language": "bash"},
                     {"block": 1, "kind": "main", "language": "python"}]})json"},
  };
  return kPlans;
}

struct Case {
  std::string id;
  std::string line;
};

std::vector<Case> LoadCases() {
  std::vector<Case> cases;
  std::ifstream in(kCasesFile);
  std::string line;
  while (std::getline(in, line)) {
    rapidjson::Document doc;
    doc.Parse(line.c_str());
    if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("id")) continue;
    cases.push_back({doc["id"].GetString(), line});
  }
  return cases;
}

// The statuses `expect.status` allows (a string or a list).
std::vector<std::string> Statuses(const rapidjson::Value& expect) {
  std::vector<std::string> out;
  if (!expect.HasMember("status")) return out;
  const auto& s = expect["status"];
  if (s.IsString()) out.push_back(s.GetString());
  if (s.IsArray()) {
    for (const auto& v : s.GetArray()) {
      if (v.IsString()) out.push_back(v.GetString());
    }
  }
  return out;
}

void CheckEachBlockAlone(const std::string& id, const std::string& markdown, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b) {
    int block = static_cast<int>(b);
    auto result = BuildRunPlan(markdown, DefaultLanguages(), block);
    CheckInvariants(id + " block " + std::to_string(b), markdown, block, result);
    if (!result.ok()) {
      BOOST_TEST(result.error().code == "bad_block", id);
      continue;
    }
    for (const PlanEntry& e : result->plan) {
      std::string want = e.index == block
                             ? "selected by block"
                             : "not selected (only block " + std::to_string(b) + " runs)";
      BOOST_TEST(e.reason == want, id << ": block " << e.index);
    }
  }
}

void RunCase(const Case& c) {
  rapidjson::Document doc;
  doc.Parse(c.line.c_str());
  const auto& request = doc["request"];
  std::string markdown;
  if (request.HasMember("markdown") && request["markdown"].IsString()) {
    markdown = request["markdown"].GetString();
  } else if (request.HasMember("language") &&
             std::string(request["language"].GetString()) == "message") {
    markdown = request["code"].GetString();  // a whole chat message given as `code`
  } else {
    BOOST_TEST_MESSAGE(c.id << ": no markdown in the request; nothing to plan");
    return;
  }
  int block = request.HasMember("block") ? request["block"].GetInt() : kAllBlocks;
  auto result = BuildRunPlan(markdown, DefaultLanguages(), block);
  BOOST_TEST_MESSAGE(c.id << ": " << ResultToJson(result));
  CheckInvariants(c.id, markdown, block, result);
  std::vector<std::string> statuses = Statuses(doc["expect"]);
  bool refused = statuses.size() == 1 && statuses[0] == "http_4xx";
  if (refused) BOOST_TEST(!result.ok(), c.id << ": expected a refusal, got a plan");
  if (!statuses.empty() && !refused) BOOST_TEST(result.ok(), c.id << ": " << ResultToJson(result));
  if (auto it = PlanExpectations().find(c.id); it != PlanExpectations().end()) {
    rapidjson::Document expected;
    expected.Parse(it->second.c_str());
    BOOST_TEST_REQUIRE(!expected.HasParseError());
    CheckExpected(c.id, result, expected);
  }
  if (result.ok()) CheckEachBlockAlone(c.id, markdown, result->plan.size());
}

struct CaseRegistrar {
  CaseRegistrar() {
    auto& suite = boost::unit_test::framework::current_auto_test_suite();
    std::vector<Case> cases = LoadCases();
    if (cases.empty()) {
      const std::string path = kCasesFile;
      suite.add(boost::unit_test::make_test_case(
          [path] { BOOST_FAIL("no cases read from " << path << " (shared/ beside the repo)"); },
          "cases_file_missing", __FILE__, __LINE__));
    }
    for (const Case& c : cases) {
      suite.add(boost::unit_test::make_test_case([c] { RunCase(c); }, c.id, __FILE__, __LINE__));
    }
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(SharedMessages)
static CaseRegistrar cases_registrar;
BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::markdown
