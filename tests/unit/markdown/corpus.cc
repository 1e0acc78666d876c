#include "corpus.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <boost/test/unit_test.hpp>
#include <fstream>
#include <sstream>

#include "markdown/fenced_blocks.h"
#include "markdown/text_util.h"

namespace sandrun::markdown::testing {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ToCrlf(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\n') out.push_back('\r');
    out.push_back(c);
  }
  return out;
}

std::string ResultToJson(const Result<RunPlan>& result, bool with_code) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  if (!result.ok()) {
    w.Key("error");
    w.StartObject();
    w.Key("code");
    w.String(ErrorKindName(result.error().kind));
    w.Key("message");
    w.String(result.error().message.c_str());
    w.EndObject();
    w.EndObject();
    return buffer.GetString();
  }
  w.Key("plan");
  w.StartArray();
  for (const PlanEntry& e : result->plan) {
    w.StartObject();
    w.Key("index");
    w.Int(e.index);
    w.Key("language");
    w.String(e.language.c_str());
    w.Key("run");
    w.Bool(e.run);
    w.Key("reason");
    w.String(e.reason.c_str());
    w.EndObject();
  }
  w.EndArray();
  w.Key("steps");
  w.StartArray();
  for (const Step& s : result->steps) {
    w.StartObject();
    w.Key("block");
    w.Int(s.block_index);
    w.Key("kind");
    w.String(StepKindName(s.kind));
    w.Key("language");
    w.String(s.language.c_str());
    if (!s.save_as.empty()) {
      w.Key("save_as");
      w.String(s.save_as.c_str());
    }
    if (with_code) {
      w.Key("code");
      w.String(s.code.c_str());
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return buffer.GetString();
}

namespace {

std::string Str(const rapidjson::Value& v, const char* key, const char* fallback = "") {
  return v.HasMember(key) && v[key].IsString() ? v[key].GetString() : fallback;
}

void CheckPlan(const std::string& name, const RunPlan& plan, const rapidjson::Value& expected) {
  const auto& entries = expected["plan"].GetArray();
  BOOST_TEST_REQUIRE(plan.plan.size() == entries.Size(),
                     name << ": plan has " << plan.plan.size() << " entries");
  for (rapidjson::SizeType i = 0; i < entries.Size(); ++i) {
    const auto& e = entries[i];
    const PlanEntry& got = plan.plan[i];
    std::string at = name + ": block " + std::to_string(i);
    BOOST_TEST(got.index == static_cast<int>(i), at);
    if (e.HasMember("language")) BOOST_TEST(got.language == Str(e, "language"), at);
    BOOST_TEST(got.run == e["run"].GetBool(), at << " run (" << got.reason << ")");
    std::string reason = Str(e, "reason");
    BOOST_TEST(got.reason.find(reason) != std::string::npos,
               at << " reason '" << got.reason << "' lacks '" << reason << "'");
  }
}

void CheckSteps(const std::string& name, const RunPlan& plan, const rapidjson::Value& expected) {
  const auto& steps = expected["steps"].GetArray();
  BOOST_TEST_REQUIRE(plan.steps.size() == steps.Size(),
                     name << ": " << plan.steps.size() << " steps");
  for (rapidjson::SizeType i = 0; i < steps.Size(); ++i) {
    const auto& s = steps[i];
    const Step& got = plan.steps[i];
    std::string at = name + ": step " + std::to_string(i);
    BOOST_TEST(got.block_index == s["block"].GetInt(), at);
    BOOST_TEST(got.language == Str(s, "language"), at);
    BOOST_TEST(got.save_as == Str(s, "save_as"), at);
    if (s.HasMember("kind")) BOOST_TEST(std::string(StepKindName(got.kind)) == Str(s, "kind"), at);
    if (s.HasMember("code_contains")) {
      for (const auto& c : s["code_contains"].GetArray()) {
        BOOST_TEST(got.code.find(c.GetString()) != std::string::npos, at << " code lacks '"
                                                                         << c.GetString() << "':\n"
                                                                         << got.code);
      }
    }
    if (s.HasMember("code_lacks")) {
      for (const auto& c : s["code_lacks"].GetArray()) {
        BOOST_TEST(got.code.find(c.GetString()) == std::string::npos, at << " code has '"
                                                                         << c.GetString() << "':\n"
                                                                         << got.code);
      }
    }
  }
}

}  // namespace

void CheckExpected(const std::string& name, const Result<RunPlan>& result,
                   const rapidjson::Value& expected) {
  std::string error = Str(expected, "error");
  if (!error.empty()) {
    BOOST_TEST_REQUIRE(!result.ok(),
                       name << ": expected error " << error << ", got " << ResultToJson(result));
    BOOST_TEST(ErrorKindName(result.error().kind) == error, name);
    if (expected.HasMember("error_contains")) {
      for (const auto& c : expected["error_contains"].GetArray()) {
        BOOST_TEST(result.error().message.find(c.GetString()) != std::string::npos,
                   name << ": error message '" << result.error().message << "' lacks '"
                        << c.GetString() << "'");
      }
    }
    return;
  }
  BOOST_TEST_REQUIRE(result.ok(), name << ": " << ResultToJson(result));
  BOOST_TEST_INFO("plan: " << ResultToJson(result));
  CheckPlan(name, *result, expected);
  CheckSteps(name, *result, expected);
}

void CheckInvariants(const std::string& name, std::string_view markdown, int block,
                     const Result<RunPlan>& result) {
  if (!result.ok()) {
    BOOST_TEST(!result.error().message.empty(), name);
    return;
  }
  const RunPlan& plan = *result;
  BOOST_TEST(plan.plan.size() == ExtractFencedBlocks(markdown).size(), name);
  bool runs = false;
  int last = -1;
  for (size_t i = 0; i < plan.plan.size(); ++i) {
    BOOST_TEST(plan.plan[i].index == static_cast<int>(i), name);
    BOOST_TEST(!plan.plan[i].reason.empty(), name << ": block " << i << " has no reason");
    if (block != kAllBlocks) BOOST_TEST(plan.plan[i].run == (static_cast<int>(i) == block), name);
  }
  for (const Step& s : plan.steps) {
    runs = runs || s.kind != Step::Kind::kSave;
    BOOST_TEST(s.block_index >= last, name << ": steps out of document order");
    last = s.block_index;
    BOOST_TEST_REQUIRE(s.block_index < static_cast<int>(plan.plan.size()), name);
    BOOST_TEST((s.kind == Step::Kind::kSave || !s.language.empty()), name);
    BOOST_TEST(s.code.find('\r') == std::string::npos, name << ": CR in code");
    BOOST_TEST((s.kind == Step::Kind::kSave) == !s.save_as.empty(), name);
    if (!s.save_as.empty()) BOOST_TEST(IsSafeRelativePath(s.save_as), name << ": " << s.save_as);
    bool block_runs = plan.plan[s.block_index].run;
    // A saved block does not run itself (its command does), but its pip lines still do.
    BOOST_TEST((block_runs || s.kind == Step::Kind::kSave || s.kind == Step::Kind::kInstall),
               name << ": step of block " << s.block_index << " that does not run");
    if (block != kAllBlocks) BOOST_TEST(s.block_index == block, name);
  }
  BOOST_TEST(runs, name << ": a plan without a step that runs");
}

}  // namespace sandrun::markdown::testing
