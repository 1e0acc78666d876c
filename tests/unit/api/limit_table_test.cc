#define BOOST_TEST_MODULE limit_table
// The one table of the limits (config::LimitKeys()) against what is written elsewhere: the
// documented example config and the OpenAPI response schema. A limit added, renamed or given
// another default in one place and not the other fails here.
#include <rapidjson/document.h>
#include <rapidjson/pointer.h>

#include <boost/test/unit_test.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "api/openapi.h"
#include "config/config.h"

namespace config = sandrun::config;

namespace {

using Names = std::vector<std::string>;

Names TableNames() {
  Names names;
  for (const auto& key : config::LimitKeys()) names.emplace_back(key.name);
  return names;
}

Names MemberNames(const rapidjson::Value& object) {
  Names names;
  for (auto it = object.MemberBegin(); it != object.MemberEnd(); ++it) {
    names.emplace_back(it->name.GetString());
  }
  return names;
}

rapidjson::Document ParseJsonc(const std::string& text) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseCommentsFlag | rapidjson::kParseTrailingCommasFlag>(text.c_str(),
                                                                                 text.size());
  return doc;
}

rapidjson::Document ExampleConfig() {
  std::ifstream in(SANDRUN_SOURCE_DIR "/docs/sandrun.example.jsonc");
  std::stringstream text;
  text << in.rdbuf();
  return ParseJsonc(text.str());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(LimitTable)

BOOST_AUTO_TEST_CASE(each_default_lies_between_its_minimum_and_its_ceiling) {
  const config::Limits defaults;
  const config::Limits ceilings = config::DefaultCeilings();
  for (const auto& key : config::LimitKeys()) {
    BOOST_TEST_CONTEXT(key.name) {
      BOOST_TEST(key.min <= key.default_value);
      BOOST_TEST(key.default_value <= key.default_ceiling);
      BOOST_TEST((defaults.*(key.member) == key.default_value));
      BOOST_TEST((ceilings.*(key.member) == key.default_ceiling));
      BOOST_TEST(std::string(key.help).size() > 0u);
    }
  }
  const config::Config config;
  for (const auto& key : config::LimitKeys()) {
    BOOST_TEST((config.limits.*(key.member) == key.default_value));
    BOOST_TEST((config.ceilings.*(key.member) == key.default_ceiling));
  }
}

BOOST_AUTO_TEST_CASE(example_config_lists_every_limit_with_its_default_and_ceiling) {
  rapidjson::Document doc = ExampleConfig();
  BOOST_TEST_REQUIRE(!doc.HasParseError());
  BOOST_TEST_REQUIRE(doc.IsObject());
  for (const char* block : {"limits", "ceilings"}) {
    BOOST_TEST_CONTEXT(block) {
      BOOST_TEST_REQUIRE(doc.HasMember(block));
      const rapidjson::Value& object = doc[block];
      BOOST_TEST_REQUIRE(object.IsObject());
      BOOST_TEST(MemberNames(object) == TableNames(), boost::test_tools::per_element());
      for (const auto& key : config::LimitKeys()) {
        if (!object.HasMember(key.name)) continue;
        const int64_t want =
            std::string(block) == "limits" ? key.default_value : key.default_ceiling;
        BOOST_TEST_CONTEXT(key.name) {
          BOOST_TEST_REQUIRE(object[key.name].IsInt64());
          BOOST_TEST(object[key.name].GetInt64() == want);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(openapi_limits_are_the_table) {
  const std::string spec = sandrun::api::OpenApiJson(config::Config());
  rapidjson::Document doc;
  doc.Parse(spec.c_str(), spec.size());
  BOOST_TEST_REQUIRE(!doc.HasParseError());
  const rapidjson::Value* limits =
      rapidjson::Pointer("/components/schemas/RunResult/properties/limits/properties").Get(doc);
  BOOST_TEST_REQUIRE(limits != nullptr);
  BOOST_TEST_REQUIRE(limits->IsObject());
  BOOST_TEST(MemberNames(*limits) == TableNames(), boost::test_tools::per_element());
  for (auto it = limits->MemberBegin(); it != limits->MemberEnd(); ++it) {
    BOOST_TEST(std::string(it->value["type"].GetString()) == "integer");
  }
}

BOOST_AUTO_TEST_CASE(one_decoder_checks_names_types_minimums_and_ceilings) {
  using Kind = config::LimitError::Kind;
  const config::Limits ceilings = config::DefaultCeilings();
  auto decode = [&](const char* json, const config::Limits* with) {
    config::Limits limits;
    rapidjson::Document doc = ParseJsonc(json);
    auto error = config::DecodeLimits(doc, with, &limits);
    return std::make_pair(error, limits);
  };
  auto [ok, limits] = decode(R"({"memory_mb": 1024, "max_files": 0})", &ceilings);
  BOOST_TEST(!ok.has_value());
  BOOST_TEST(limits.memory_mb == 1024);
  BOOST_TEST(limits.max_files == 0);
  BOOST_TEST((decode("[]", &ceilings).first->kind == Kind::kNotObject));
  auto unknown = decode(R"({"memory": 1})", &ceilings).first;
  BOOST_TEST((unknown->kind == Kind::kUnknown && unknown->name == "memory"));
  BOOST_TEST((decode(R"({"memory_mb": "1"})", &ceilings).first->kind == Kind::kNotInteger));
  auto low = decode(R"({"memory_mb": 15})", &ceilings).first;
  BOOST_TEST((low->kind == Kind::kBelowMinimum && low->key->min == 16));
  auto high = decode(R"({"memory_mb": 8193})", &ceilings).first;
  BOOST_TEST((high->kind == Kind::kAboveCeiling && high->ceiling == 8192 && high->value == 8193));
  // Without ceilings (the config's own "limits" and "ceilings"): only the minimum holds.
  BOOST_TEST(!decode(R"({"memory_mb": 8193})", nullptr).first.has_value());
}

BOOST_AUTO_TEST_SUITE_END()
