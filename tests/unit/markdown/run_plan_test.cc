// The run plan (DESIGN.md §5) on a corpus of realistic model answers, tests/data/messages/:
// each NAME.md with NAME.expected.json (format in that folder's README.md). Every case is also
// planned with CRLF line endings and must give the same plan and code. Then the bounds: a
// generated 1 MB message, pathological Markdown, and the size limits.
#define BOOST_TEST_MODULE markdown_run_plan
#include "markdown/run_plan.h"

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <filesystem>

#include "corpus.h"
#include "markdown/text_util.h"

namespace sandrun::markdown {
namespace {

using testing::CheckExpected;
using testing::CheckInvariants;
using testing::ReadFile;
using testing::ResultToJson;

const std::string kCorpus = SANDRUN_MESSAGES_DIR;

void RunCorpusCase(const std::string& name) {
  std::string markdown = ReadFile(kCorpus + "/" + name + ".md");
  std::string expected_text = ReadFile(kCorpus + "/" + name + ".expected.json");
  rapidjson::Document expected;
  expected.Parse(expected_text.c_str());
  BOOST_TEST_REQUIRE(!expected.HasParseError(), name << ".expected.json is not valid JSON");
  int block = expected.HasMember("block") ? expected["block"].GetInt() : kAllBlocks;
  auto result = BuildRunPlan(markdown, DefaultLanguages(), block);
  BOOST_TEST_MESSAGE(name << ": " << ResultToJson(result));
  CheckExpected(name, result, expected);
  CheckInvariants(name, markdown, block, result);
  // The same message with the other line endings plans the same, code included.
  std::string lf = NormalizeNewlines(markdown);
  auto crlf = BuildRunPlan(testing::ToCrlf(lf), DefaultLanguages(), block);
  BOOST_TEST(
      ResultToJson(crlf, true) == ResultToJson(BuildRunPlan(lf, DefaultLanguages(), block), true),
      name << ": CRLF endings change the plan");
}

struct CorpusRegistrar {
  CorpusRegistrar() {
    auto& suite = boost::unit_test::framework::current_auto_test_suite();
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(kCorpus, ec)) {
      std::string file = entry.path().filename().string();
      const std::string suffix = ".expected.json";
      if (file.size() > suffix.size() && file.ends_with(suffix)) {
        names.push_back(file.substr(0, file.size() - suffix.size()));
      }
    }
    std::sort(names.begin(), names.end());
    if (names.size() < 30) {
      std::string dir = kCorpus;
      size_t n = names.size();
      suite.add(boost::unit_test::make_test_case(
          [dir, n] { BOOST_FAIL("only " << n << " corpus cases in " << dir << " (want 30+)"); },
          "corpus_missing", __FILE__, __LINE__));
    }
    for (const std::string& name : names) {
      suite.add(boost::unit_test::make_test_case([name] { RunCorpusCase(name); }, name, __FILE__,
                                                 __LINE__));
    }
  }
};

double MillisecondsToPlan(const std::string& markdown, Result<RunPlan>* out = nullptr) {
  auto start = std::chrono::steady_clock::now();
  auto result = BuildRunPlan(markdown, DefaultLanguages());
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (out) *out = std::move(result);
  return ms;
}

// A long answer: prose, scripts, excerpts of them, output, install and how-to-run blocks.
std::string OneMegabyteMessage() {
  std::string md;
  for (int part = 0; md.size() < (1 << 20); ++part) {
    std::string script;
    for (int line = 0; line < 40; ++line) {
      script += "value_" + std::to_string(part) + "_" + std::to_string(line) + " = " +
                std::to_string(line) + " * 3  # step " + std::to_string(line) + "\n";
    }
    script += "print(value_" + std::to_string(part) + "_39)\n";
    md += "## Part " + std::to_string(part) + "\n\nSave this as `part" + std::to_string(part) +
          ".py`:\n\n```python\n" + script + "```\n\nThe last line prints it:\n\n```python\n" +
          script.substr(script.rfind("\nvalue") + 1) +
          "```\n\nOutput:\n\n```text\n117\n```\n\n"
          "Run it:\n\n```bash\npip install numpy\npython part" +
          std::to_string(part) + ".py\n```\n\n";
  }
  return md;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(Corpus)
static CorpusRegistrar corpus_registrar;
BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Bounds)

BOOST_AUTO_TEST_CASE(one_megabyte_message_is_planned_quickly) {
  std::string md = OneMegabyteMessage();
  Result<RunPlan> result = MakeError(ErrorKind::kSystem, "");
  double ms = MillisecondsToPlan(md, &result);
  BOOST_TEST_MESSAGE("1 MB message (" << md.size() << " bytes) planned in " << ms << " ms");
  BOOST_TEST_REQUIRE(result.ok());
  CheckInvariants("1mb", md, kAllBlocks, result);
  // Every part: script saved and run by its command, excerpt repeats it, output not run.
  const auto& plan = result->plan;
  BOOST_TEST_REQUIRE(plan.size() % 4 == 0u);
  for (size_t i = 0; i < plan.size(); i += 4) {
    BOOST_TEST(plan[i].reason.find("ran as part") == 0u, plan[i].reason);
    BOOST_TEST(plan[i + 1].reason == "repeats lines of block " + std::to_string(i + 1));
    BOOST_TEST(!plan[i + 2].run);
    BOOST_TEST(plan[i + 3].run);
  }
}

BOOST_AUTO_TEST_CASE(one_huge_block_of_equal_lines_is_fast) {
  std::string line = "print('same line')\n";
  std::string code;
  while (code.size() < (1 << 20)) code += line;
  std::string md = "```python\n" + code + "```\n\n```python\n" + code + "```\n";
  Result<RunPlan> result = MakeError(ErrorKind::kSystem, "");
  double ms = MillisecondsToPlan(md, &result);
  BOOST_TEST_MESSAGE("2 x 1 MB equal lines planned in " << ms << " ms");
  BOOST_TEST_REQUIRE(result.ok());
  BOOST_TEST(result->plan[1].reason == "repeats lines of block 1");
}

BOOST_AUTO_TEST_CASE(pathological_markdown_is_fast) {
  const std::vector<std::pair<std::string, std::string>> kUnits = {
      {"backticks", "`"},      {"fence_openers", "```\n"}, {"tildes", "~~~~~~~~\n"},
      {"emphasis", "*a _b "},  {"brackets", "[a]("},       {"nested_quotes", "> "},
      {"nested_lists", "- "},  {"html_comment", "<!-- "},  {"links", "[x]: /u 't'\n"},
      {"code_spans", "``a` "}, {"list_fences", "- ```\n"}, {"entities", "&#35;&amp;"},
  };
  for (const auto& [name, unit] : kUnits) {
    std::string md;
    while (md.size() < (1 << 20)) md += unit;
    md += "\n\n```python\nprint(1)\n```\n";
    Result<RunPlan> result = MakeError(ErrorKind::kSystem, "");
    double ms = MillisecondsToPlan(md, &result);
    BOOST_TEST_MESSAGE(name << ": " << ms << " ms");
    CheckInvariants(name, md, kAllBlocks, result);
  }
}

// Regression: per-line work that was linear in the block (deduplicating written files, notes
// on skipped lines, closing heredocs) made these ~1 MB blocks take 2-13 s.
BOOST_AUTO_TEST_CASE(one_megabyte_shell_block_shapes_are_fast) {
  std::string writes_and_runs, skipped_runs, heredocs = "cat", closers, named;
  for (int i = 0; i < 25000; ++i) writes_and_runs += "echo x > f" + std::to_string(i) + ".txt\n";
  for (int i = 0; i < 25000; ++i) writes_and_runs += "python g" + std::to_string(i) + ".py\n";
  for (int i = 0; i < 60000; ++i) skipped_runs += "python h" + std::to_string(i) + ".py\n";
  for (int i = 0; i < 50000; ++i) heredocs += " <<E" + std::to_string(i);
  for (int i = 0; i < 50000; ++i) closers += "E" + std::to_string(i) + "\n";
  for (int i = 0; i < 3000; ++i) {
    named += "```python title=\"n" + std::to_string(i) + ".py\"\nprint(1)\n```\n";
  }
  named += "```bash\n";
  for (int i = 0; i < 3000; ++i) named += "python n" + std::to_string(i) + ".py\n";
  const std::vector<std::pair<std::string, std::string>> kCases = {
      {"writes_and_runs", "```bash\n" + writes_and_runs + "```\n"},
      {"skipped_runs", "```python\nprint(1)\n```\n```bash\necho\n" + skipped_runs + "```\n"},
      {"heredocs", "```bash\n" + heredocs + "\n" + closers + "```\n"},
      {"named_blocks", named + "```\n"},
  };
  for (const auto& [name, md] : kCases) {
    Result<RunPlan> result = MakeError(ErrorKind::kSystem, "");
    double ms = MillisecondsToPlan(md, &result);
    BOOST_TEST_MESSAGE(name << ": " << md.size() << " bytes in " << ms << " ms");
    CheckInvariants(name, md, kAllBlocks, result);
    for (const PlanEntry& e : result->plan) {
      BOOST_TEST(e.reason.size() < 1000u, name << ": reason of " << e.reason.size() << " bytes");
    }
  }
}

BOOST_AUTO_TEST_CASE(over_the_size_limit_is_refused) {
  std::string md(kMaxMarkdownBytes + 1, 'a');
  auto result = BuildRunPlan(md, DefaultLanguages());
  BOOST_TEST_REQUIRE(!result.ok());
  BOOST_TEST((result.error().kind == ErrorKind::kTooLarge));
}

BOOST_AUTO_TEST_CASE(too_many_blocks_are_refused) {
  std::string md;
  for (size_t i = 0; i <= kMaxBlocks; ++i) md += "```python\nx = 1\n```\n";
  auto result = BuildRunPlan(md, DefaultLanguages());
  BOOST_TEST_REQUIRE(!result.ok());
  BOOST_TEST((result.error().kind == ErrorKind::kTooLarge));
  BOOST_TEST(result.error().message.find("code blocks") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(Arguments)

BOOST_AUTO_TEST_CASE(negative_block_other_than_all_is_bad_block) {
  auto result = BuildRunPlan("```python\nprint(1)\n```\n", DefaultLanguages(), -2);
  BOOST_TEST_REQUIRE(!result.ok());
  BOOST_TEST((result.error().kind == ErrorKind::kBadBlock));
}

BOOST_AUTO_TEST_CASE(block_of_a_message_without_blocks_is_bad_block) {
  auto result = BuildRunPlan("just words", DefaultLanguages(), 0);
  BOOST_TEST_REQUIRE(!result.ok());
  BOOST_TEST((result.error().kind == ErrorKind::kBadBlock));
  BOOST_TEST(result.error().message.find("no fenced code block") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(other_configured_languages_run_as_main_code) {
  std::vector<LanguageAliases> langs = DefaultLanguages();
  langs.push_back({"node", {"js", "javascript"}});
  auto result = BuildRunPlan("```js\nconsole.log(1)\n```\n", langs);
  BOOST_TEST_REQUIRE(result.ok());
  BOOST_TEST(result->plan[0].language == "node");
  BOOST_TEST(result->plan[0].reason == "main code");
  BOOST_TEST(result->steps[0].language == "node");
}

BOOST_AUTO_TEST_CASE(without_a_shell_pip_lines_stay_and_shell_blocks_do_not_run) {
  std::vector<LanguageAliases> python_only = {{"python", {"py", "python3"}}};
  auto result = BuildRunPlan(
      "```bash\npip install x\n```\n\n```python\n!pip install x\nprint(1)\n```\n", python_only);
  BOOST_TEST_REQUIRE(result.ok());
  BOOST_TEST(result->plan[0].reason == "language 'bash' is not runnable");
  BOOST_TEST_REQUIRE(result->steps.size() == 1u);
  BOOST_TEST(result->steps[0].code.find("!pip install x") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(configured_names_are_used_case_insensitively) {
  std::vector<LanguageAliases> langs = {{"Python", {"PY"}}, {"bash", {}}};
  auto result = BuildRunPlan("```py\nprint(1)\n```\n\n```PYTHON\nprint(2)\n```\n", langs);
  BOOST_TEST_REQUIRE(result.ok());
  BOOST_TEST(result->steps.size() == 2u);
  BOOST_TEST(result->steps[1].language == "Python");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(PipLines)

BOOST_AUTO_TEST_CASE(notebook_pip_lines_become_shell_commands_and_stay_as_comments) {
  const PipSplit split = SplitPipLines(
      "!pip install yfinance\n%pip install -q pandas matplotlib\n%matplotlib inline\n"
      "import yfinance\nif True:\n    !pip3 install x\nprint('pip install is text')\n");
  BOOST_TEST(split.pip_code ==
             "pip install yfinance\npip install -q pandas matplotlib\n"
             "pip3 install x\n");
  BOOST_TEST(split.code ==
             "# !pip install yfinance\n# %pip install -q pandas matplotlib\n"
             "# %matplotlib inline\nimport yfinance\nif True:\n    # !pip3 install x\n"
             "print('pip install is text')\n");
  BOOST_TEST(split.matplotlib_magic);
}

BOOST_AUTO_TEST_CASE(python_without_notebook_lines_is_unchanged) {
  const std::string code = "import os\nprint(os.name)\n";
  const PipSplit split = SplitPipLines(code);
  BOOST_TEST(split.code == code);
  BOOST_TEST(split.pip_code.empty());
  BOOST_TEST(!split.matplotlib_magic);
  // `!ls` is a shell line but not an install: it is left for Python to refuse.
  BOOST_TEST(SplitPipLines("!ls\n").pip_code.empty());
}

BOOST_AUTO_TEST_SUITE_END()

// Original-then-fixed pairs, transcripts with arguments, and reads of stdin (DESIGN.md,
// Additions "Answers as people write them"); the whole answers are in the corpus.
BOOST_AUTO_TEST_SUITE(AnswerShapes)

BOOST_AUTO_TEST_CASE(a_fix_word_without_shared_lines_supersedes_nothing) {
  // "instead" before a block that shares one line with the earlier one: both run.
  auto result = BuildRunPlan(
      "```python\nimport math\nprint(math.pi)\nprint(math.e)\n```\n\n"
      "Or use numpy instead:\n\n```python\nimport numpy as np\nprint(math.pi)\nprint(np.e)\n"
      "print(np.sqrt(2))\n```\n",
      DefaultLanguages());
  BOOST_TEST_REQUIRE(result.ok());
  BOOST_TEST(result->plan[0].reason == "main code");
  BOOST_TEST(result->plan[1].reason == "main code");
}

BOOST_AUTO_TEST_CASE(shared_lines_without_a_fix_word_supersede_nothing) {
  const std::string code = "x = 1\ny = 2\nprint(x + y)\n";
  auto result =
      BuildRunPlan("```python\n" + code + "```\n\nAgain, with a print of y:\n\n```python\n" + code +
                       "print(y)\n```\n",
                   DefaultLanguages());
  BOOST_TEST_REQUIRE(result.ok());
  BOOST_TEST(result->plan[0].run);
  BOOST_TEST(result->plan[1].run);
}

BOOST_AUTO_TEST_CASE(a_fix_in_another_language_supersedes_nothing) {
  auto result = BuildRunPlan(
      "```bash\necho one\necho two\n```\n\nThe fixed version:\n\n```python\necho one\necho two\n"
      "```\n",
      DefaultLanguages());
  BOOST_TEST_REQUIRE(result.ok());
  BOOST_TEST(result->plan[0].run);
}

BOOST_AUTO_TEST_CASE(only_the_nearest_earlier_block_is_superseded) {
  const std::string v1 = "a = [1, 2, 3]\nb = sum(a)\nprint(b / len(a))\n";
  auto result = BuildRunPlan("```python\n" + v1 + "```\n\n```python\n" + v1 +
                                 "print('two')\n```\n\nHere is the corrected code:\n\n```python\n" +
                                 v1 + "print('three')\n```\n",
                             DefaultLanguages());
  BOOST_TEST_REQUIRE(result.ok());
  // Block 2 repeats block 1's lines plus one: it is not an excerpt; the fix replaces block 2.
  BOOST_TEST(result->plan[0].run);
  BOOST_TEST(result->plan[1].reason.find("superseded by block 3, its corrected version (the "
                                         "text before it says \"corrected\"") == 0u,
             result->plan[1].reason);
  BOOST_TEST(result->plan[2].run);
}

BOOST_AUTO_TEST_CASE(a_transcript_without_arguments_stays_example_output) {
  auto result = BuildRunPlan(
      "Save as `fib.py`:\n\n```python\nprint(55)\n```\n\n```bash\n$ python fib.py\n55\n```\n",
      DefaultLanguages());
  BOOST_TEST_REQUIRE(result.ok());
  BOOST_TEST(result->plan[0].reason == "main code");
  BOOST_TEST(result->plan[1].reason == "example output");
}

BOOST_AUTO_TEST_CASE(an_untagged_transcript_with_arguments_runs_the_file) {
  auto result = BuildRunPlan(
      "Save as `greet.py`:\n\n```python\nimport sys\nprint('hi', *sys.argv[1:])\n```\n\n"
      "```\n$ python3 greet.py Ada Lovelace\nhi Ada Lovelace\n```\n",
      DefaultLanguages());
  BOOST_TEST_REQUIRE(result.ok());
  BOOST_TEST(result->plan[0].reason == "ran as greet.py (by block 2)");
  BOOST_TEST(result->plan[1].language == "bash");
  BOOST_TEST_REQUIRE(result->steps.size() == 2u);
  BOOST_TEST(result->steps[1].code == "python3 greet.py Ada Lovelace\n");
}

BOOST_AUTO_TEST_CASE(reads_of_stdin_are_named_with_block_and_line) {
  auto result = BuildRunPlan(
      "```python\nprint('start')\n# input() in a comment is no read\nname = input('Name? ')\n```\n"
      "\n```bash\necho hi\nread -r x\n```\n\n```python\nimport sys\ndata = sys.stdin.read()\n```\n"
      "\n```python\nprint(user_input('x'))\n```\n",
      DefaultLanguages());
  BOOST_TEST_REQUIRE(result.ok());
  BOOST_TEST_REQUIRE(result->steps.size() == 4u);
  BOOST_TEST(result->steps[0].reads_stdin == "input() on line 3 of block 1");
  BOOST_TEST(result->steps[1].reads_stdin == "read on line 2 of block 2");
  BOOST_TEST(result->steps[2].reads_stdin == "sys.stdin on line 2 of block 3");
  BOOST_TEST(result->steps[3].reads_stdin == "");
}

BOOST_AUTO_TEST_CASE(a_how_to_step_reads_what_its_saved_block_reads) {
  auto result = BuildRunPlan(
      "Save as `ask.py`:\n\n```python\nx = input()\nprint(x)\n```\n\nRun:\n\n```bash\n"
      "python ask.py\n```\n",
      DefaultLanguages());
  BOOST_TEST_REQUIRE(result.ok());
  BOOST_TEST_REQUIRE(result->steps.size() == 2u);
  BOOST_TEST(result->steps[1].reads_stdin == "input() on line 1 of block 1");
}

BOOST_AUTO_TEST_CASE(bad_block_message_says_the_field_counts_from_0) {
  auto result =
      BuildRunPlan("```python\nprint(1)\n```\n\n```python\nprint(2)\n```\n", DefaultLanguages(), 2);
  BOOST_TEST_REQUIRE(!result.ok());
  BOOST_TEST(result.error().message ==
             "'block' 2 does not exist: the message has 2 code blocks; 'block' counts from 0, so "
             "0 to 1");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::markdown
