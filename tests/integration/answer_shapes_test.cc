// Common shapes of a model's answer, run the way the Run button sends them (`markdown`), through
// nginx: a re-run offers its files again, an original-then-fixed pair runs the fix, a
// `$ python fib.py 15` transcript gives the file its arguments, a program that waits for
// input says so in one line (DESIGN.md §5).
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <boost/test/unit_test.hpp>
#include <map>
#include <string>

#include "helpers.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

// A /run body: {"markdown": md, <string fields>..., "stateful": true when asked}.
std::string MarkdownBody(const std::string& md, const std::map<std::string, std::string>& fields,
                         bool stateful = false) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("markdown");
  w.String(md.c_str(), static_cast<rapidjson::SizeType>(md.size()));
  for (const auto& [key, value] : fields) {
    w.Key(key.c_str());
    w.String(value.c_str(), static_cast<rapidjson::SizeType>(value.size()));
  }
  if (stateful) {
    w.Key("stateful");
    w.Bool(true);
  }
  w.EndObject();
  return buffer.GetString();
}

// path -> {sha256, url} of the response's files.
std::map<std::string, std::pair<std::string, std::string>> Files(const rapidjson::Document& doc) {
  std::map<std::string, std::pair<std::string, std::string>> out;
  BOOST_TEST_REQUIRE(doc["files"].IsArray());
  for (const auto& f : doc["files"].GetArray()) {
    out[f["path"].GetString()] = {f["sha256"].GetString(), f["url"].GetString()};
  }
  return out;
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Writes report.csv with the same bytes every time; seed.txt only when it is not there yet.
const char kReportAnswer[] =
    "Here is the report script:\n\n"
    "```python\n"
    "import os\n"
    "if not os.path.exists('seed.txt'):\n"
    "    with open('seed.txt', 'w') as f:\n"
    "        f.write('seed')\n"
    "with open('report.csv', 'w') as f:\n"
    "    f.write('city,temp\\nOslo,4.5\\n')\n"
    "print('report written')\n"
    "```\n";

void RerunOffersTheSameFiles(const std::string& user, const std::string& session, bool stateful) {
  const std::string body =
      MarkdownBody(kReportAnswer, {{"user", user}, {"session", session}}, stateful);
  auto first = PostRun(body);
  BOOST_TEST_REQUIRE(Str(first, "status") == "ok", Str(first, "stderr"));
  auto one = Files(first);
  BOOST_TEST(one.size() == 2u);
  BOOST_TEST_REQUIRE(one.count("report.csv") == 1u);
  BOOST_TEST(one.count("seed.txt") == 1u);
  auto second = PostRun(body);
  BOOST_TEST_REQUIRE(Str(second, "status") == "ok", Str(second, "stderr"));
  auto two = Files(second);
  // report.csv was written again with the same bytes: offered again, with a link of this
  // run; seed.txt came back from the session untouched: not offered.
  BOOST_TEST(two.size() == 1u);
  BOOST_TEST_REQUIRE(two.count("report.csv") == 1u);
  BOOST_TEST(two["report.csv"].first == one["report.csv"].first);
  BOOST_TEST(two["report.csv"].second != one["report.csv"].second);
  BOOST_TEST(GetUrl(two["report.csv"].second).body == "city,temp\nOslo,4.5\n");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(AnswerShapes)

BOOST_AUTO_TEST_CASE(rerun_in_a_session_offers_the_files_it_wrote_again) {
  RerunOffersTheSameFiles("shape-user", "chat-rerun", false);
}

BOOST_AUTO_TEST_CASE(stateful_rerun_offers_the_files_it_wrote_again) {
  RerunOffersTheSameFiles("shape-user", "chat-rerun-kernel", true);
}

BOOST_AUTO_TEST_CASE(a_restored_file_read_but_not_written_is_not_offered) {
  const std::map<std::string, std::string> session = {{"user", "shape-user"},
                                                      {"session", "chat-read"}};
  auto first =
      PostRun(MarkdownBody("```bash\nprintf 'a,b\\n' > data.csv\necho made\n```\n", session));
  BOOST_TEST(Files(first).count("data.csv") == 1u);
  // Read, copied, chmod-free: data.csv is untouched, copy.csv is new.
  auto second =
      PostRun(MarkdownBody("```bash\ncat data.csv\ncp data.csv copy.csv\n```\n", session));
  BOOST_TEST(Str(second, "stdout") == "a,b\n");
  auto files = Files(second);
  BOOST_TEST(files.size() == 1u);
  BOOST_TEST(files.count("copy.csv") == 1u);
}

BOOST_AUTO_TEST_CASE(original_then_fixed_runs_the_fix) {
  const std::string md = ReadFile(std::string(SANDRUN_SOURCE_DIR) +
                                  "/tests/data/messages/original_then_fixed_version.md");
  BOOST_TEST_REQUIRE(!md.empty());
  auto doc = PostRun(MarkdownBody(md, {}));
  BOOST_TEST(Str(doc, "status") == "ok", Str(doc, "stderr"));
  BOOST_TEST(Has(Str(doc, "stdout"), "Total: 2.05"), Str(doc, "stdout"));
  BOOST_TEST(!Has(Str(doc, "stderr"), "KeyError"));
  const auto& plan = doc["plan"];
  BOOST_TEST_REQUIRE(plan.Size() == 3u);
  BOOST_TEST(!plan[0]["run"].GetBool());
  BOOST_TEST(Str(plan[0], "reason") ==
             "superseded by block 3, its corrected version (the text before it says \"fixed\", "
             "and it has 5 of this block's 6 lines)");
  BOOST_TEST(plan[2]["run"].GetBool());
}

BOOST_AUTO_TEST_CASE(transcript_gives_the_file_its_arguments) {
  const std::string md = ReadFile(std::string(SANDRUN_SOURCE_DIR) +
                                  "/tests/data/messages/transcript_runs_file_with_arguments.md");
  BOOST_TEST_REQUIRE(!md.empty());
  auto doc = PostRun(MarkdownBody(md, {}));
  BOOST_TEST(Str(doc, "status") == "ok", Str(doc, "stderr"));
  BOOST_TEST(Has(Str(doc, "stdout"), "fib(15) = 610"), Str(doc, "stdout"));
  BOOST_TEST(Str(doc["plan"][0], "reason") == "ran as fib.py (by block 2)");
}

BOOST_AUTO_TEST_CASE(input_without_stdin_says_so_in_one_line) {
  const std::string md =
      "Run this and type your name:\n\n```python\nname = input('Your name? ')\n"
      "print('Hello,', name)\n```\n";
  auto doc = PostRun(MarkdownBody(md, {}));
  BOOST_TEST(Str(doc, "status") == "error");
  const std::string err = Str(doc, "stderr");
  BOOST_TEST(Has(err, "EOFError"), err);
  BOOST_TEST(Has(err,
                 "sandrun: the program asked for input (input() on line 1 of block 1) and "
                 "got none: stdin is empty (the request has no `stdin`"),
             err);
  // With stdin, no note, and the program gets it.
  auto fed = PostRun(MarkdownBody(md, {{"stdin", "Ada\n"}}));
  BOOST_TEST(Str(fed, "status") == "ok", Str(fed, "stderr"));
  BOOST_TEST(Has(Str(fed, "stdout"), "Hello, Ada"), Str(fed, "stdout"));
  BOOST_TEST(!Has(Str(fed, "stderr"), "asked for input"));
}

BOOST_AUTO_TEST_CASE(stdin_goes_to_the_block_that_reads_it) {
  // The reading block is not the last one: stdin goes to it, not to the last step.
  const std::string md =
      "```bash\nread -r answer\necho \"answer=[$answer]\"\n```\n\n"
      "Then:\n\n```python\nprint('second block')\n```\n";
  auto fed = PostRun(MarkdownBody(md, {{"stdin", "42\n"}}));
  BOOST_TEST(Str(fed, "status") == "ok", Str(fed, "stderr"));
  BOOST_TEST(Has(Str(fed, "stdout"), "answer=[42]"), Str(fed, "stdout"));
  BOOST_TEST(!Has(Str(fed, "stderr"), "asked for input"));
  // Without stdin, bash's `read` sees the end at once: one line says so.
  auto bare = PostRun(MarkdownBody(md, {}));
  BOOST_TEST(Has(Str(bare, "stdout"), "answer=[]"), Str(bare, "stdout"));
  BOOST_TEST(Has(Str(bare, "stderr"),
                 "sandrun: the program asked for input (read on line 1 of block 1) and got none"),
             Str(bare, "stderr"));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
