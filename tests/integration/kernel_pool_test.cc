// The kernel pool (src/kernel/kernel_pool.h): notebook runs and new stateful kernels take a
// kernel booted ahead. Through the real nginx and daemon, with a stack of their own
// (CMakeLists.txt: kernel_pool_size 1 and no warm pool, so every pool-<...> on the host is
// the kernel pool's; KernelPoolOff: kernel_pool_size 0). That nothing of the pool outlives
// the daemon (a stop, a kill) is checked by the Kernels suite's stop and kill cases, whose
// stack has the default pool.
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "helpers.h"
#include "host_state.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

// stdout of snippet `i` of a notebook run's answer ("" when it has none).
std::string SnippetOut(const rapidjson::Value& doc, rapidjson::SizeType i) {
  if (!doc.HasMember("snippets") || !doc["snippets"].IsArray() || doc["snippets"].Size() <= i) {
    return "";
  }
  return Str(doc["snippets"][i], "stdout");
}

// A notebook run (a markdown answer) of `user`'s `session` ("" = none) with `files`
// (path -> content in base64) and, when disk_mb > 0, that limit (one the pool does not serve).
std::string Notebook(const std::string& markdown, const std::string& session = "",
                     const std::vector<std::pair<std::string, std::string>>& files = {},
                     int64_t disk_mb = 0) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("markdown");
  w.String(markdown.c_str());
  w.Key("user");
  w.String("pool-user");
  if (!session.empty()) {
    w.Key("session");
    w.String(session.c_str());
  }
  w.Key("limits");
  w.StartObject();
  // Per run, not the kernel's: the pool serves them (matplotlib's first import is slow).
  w.Key("wall_time_s");
  w.Int(60);
  w.Key("cpu_time_s");
  w.Int(60);
  if (disk_mb > 0) {
    w.Key("disk_mb");
    w.Int64(disk_mb);
  }
  w.EndObject();
  if (!files.empty()) {
    w.Key("files");
    w.StartArray();
    for (const auto& [path, content] : files) {
      w.StartObject();
      w.Key("path");
      w.String(path.c_str());
      w.Key("content_base64");
      w.String(content.c_str());
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndObject();
  return buffer.GetString();
}

// What a run's answer says, with the parts that differ between any two runs left out (ids,
// links, times, sizes of the tmpfs): status, streams, each snippet's, displays and files by
// name and content digest.
std::string Essentials(const rapidjson::Value& doc) {
  std::string out = "status=" + Str(doc, "status") + "\nstdout=" + Str(doc, "stdout") +
                    "\nstderr=" + Str(doc, "stderr") + "\n";
  if (doc.HasMember("snippets") && doc["snippets"].IsArray()) {
    for (const auto& s : doc["snippets"].GetArray()) {
      out += "snippet " + Str(s, "status") + " " + Str(s, "stdout") + "|" + Str(s, "stderr") + "\n";
    }
  }
  if (doc.HasMember("displays") && doc["displays"].IsArray()) {
    for (const auto& d : doc["displays"].GetArray()) out += "display " + Str(d, "kind") + "\n";
  }
  if (doc.HasMember("files") && doc["files"].IsArray()) {
    for (const auto& f : doc["files"].GetArray()) {
      out += "file " + Str(f, "path") +
             (Str(f, "path").find(".png") != std::string::npos ? std::string(" (png)")
                                                               : " " + Str(f, "sha256")) +
             "\n";
    }
  }
  return out;
}

// Seeds `session` with kept.txt through a stateless run (its files are saved to the session).
void SeedSession(const std::string& session) {
  auto r = PostRun(R"({"language": "bash", "user": "pool-user", "session": ")" + session +
                   R"(", "code": "printf 'from the session' > kept.txt"})");
  BOOST_TEST_REQUIRE(Str(r, "status") == "ok", Str(r, "stderr"));
}

const char kAnswer[] =
    "Two cells:\n\n"
    "```python\n"
    "import os\n"
    "data = open('input.txt').read().strip()\n"
    "kept = open('kept.txt').read()\n"
    "x = 41\n"
    "```\n\n"
    "Then:\n\n"
    "```python\n"
    "x += 1\n"
    "print(x, data, kept, sorted(os.listdir('.')))\n"
    "open('out.csv', 'w').write('a,b\\n1,2\\n')\n"
    "import matplotlib.pyplot as plt\n"
    "plt.plot([1, 2, 3])\n"
    "plt.show()\n"
    "```\n";

}  // namespace

BOOST_AUTO_TEST_SUITE(KernelPool)

// The differential: one answer run twice, its kernel from the pool and new (disk_mb 99, which
// the pool does not serve), in sessions seeded alike: the same answer both ways — the
// session's file copied into the frozen pooled kernel, the input file, the variables of
// block 1 in block 2, the written file and the figure.
BOOST_AUTO_TEST_CASE(a_notebook_run_from_the_pool_answers_as_one_from_a_new_kernel) {
  BOOST_TEST(KernelPoolStat("size") == 1);
  BOOST_TEST(KernelPoolStat("active") == 0, "no kernel was started yet: the pool waits for one");
  // The first kernel start fills the pool.
  auto first = PostRun(Notebook("```python\nx = 1\n```\n\n```python\nprint(x)\n```\n"));
  BOOST_TEST_REQUIRE(SnippetOut(first, 1) == "1\n", Str(first, "stderr"));
  WaitForKernelPoolFull();
  SeedSession("diff-pooled");
  SeedSession("diff-fresh");
  const std::vector<std::pair<std::string, std::string>> files = {{"input.txt", "cGxhY2VkCg=="}};
  const int64_t hits = KernelPoolStat("hits");
  auto pooled = PostRun(Notebook(kAnswer, "diff-pooled", files));
  BOOST_TEST(KernelPoolStat("hits") == hits + 1, "the run took the pooled kernel");
  auto fresh = PostRun(Notebook(kAnswer, "diff-fresh", files, 99));
  BOOST_TEST(KernelPoolStat("hits") == hits + 1, "disk_mb 99: a new kernel");
  BOOST_TEST(Str(pooled, "status") == "ok", Str(pooled, "stderr"));
  BOOST_TEST(Str(pooled, "stdout").find("42 placed from the session [") != std::string::npos,
             Str(pooled, "stdout"));
  BOOST_TEST(Essentials(pooled) == Essentials(fresh));
  BOOST_TEST(Essentials(pooled).find("display image") != std::string::npos, Essentials(pooled));
  BOOST_TEST(Essentials(pooled).find("file out.csv") != std::string::npos, Essentials(pooled));
}

// A pooled kernel serves one run: what a run leaves (a variable, a file in /tmp) is not in
// the next run's kernel, also from the pool; a stateful session's new kernel comes from it too
// and is then the session's.
BOOST_AUTO_TEST_CASE(a_pooled_kernel_is_handed_out_once) {
  const char* mark =
      "```python\nimport os\nprint('marked' in globals(), os.path.exists('/tmp/mark'))\n```\n\n"
      "```python\nmarked = 1\nopen('/tmp/mark', 'w').write('1')\n```\n";
  for (int i = 0; i < 2; ++i) {
    WaitForKernelPoolFull();
    const int64_t hits = KernelPoolStat("hits");
    auto r = PostRun(Notebook(mark));
    BOOST_TEST(KernelPoolStat("hits") == hits + 1);
    BOOST_TEST(SnippetOut(r, 0) == "False False\n", Str(r, "stderr"));
  }
  WaitForKernelPoolFull();
  const int64_t hits = KernelPoolStat("hits");
  const std::string stateful = R"({"language": "python", "stateful": true, "user": "pool-user",
    "session": "pool-stateful", "code": ")";
  auto a = PostRun(stateful + R"(import os\nprint('marked' in globals()); s = 5"})");
  BOOST_TEST(Str(a, "stdout") == "False\n", Str(a, "stderr"));
  BOOST_TEST(KernelPoolStat("hits") == hits + 1);
  auto b = PostRun(stateful + R"j(print(s)"})j");
  BOOST_TEST(Str(b, "stdout") == "5\n", Str(b, "stderr"));
  BOOST_TEST(Str(b["kernel"], "status") == "kept");
}

BOOST_AUTO_TEST_SUITE_END()

// kernel_pool_size 0: every kernel starts on its run's request, and nothing is pooled.
BOOST_AUTO_TEST_SUITE(KernelPoolOff)

BOOST_AUTO_TEST_CASE(without_a_pool_notebook_and_stateful_runs_start_their_kernels) {
  BOOST_TEST(KernelPoolStat("size") == 0);
  auto r =
      PostRun(Notebook(kAnswer, "", {{"input.txt", "cGxhY2VkCg=="}, {"kept.txt", "Z2l2ZW4="}}));
  BOOST_TEST(Str(r, "status") == "ok", Str(r, "stderr"));
  BOOST_TEST(Str(r, "stdout").find("42 placed given") != std::string::npos, Str(r, "stdout"));
  auto s = PostRun(R"j({"language": "python", "stateful": true, "user": "pool-user",
    "session": "off", "code": "print(6 * 7)"})j");
  BOOST_TEST(Str(s, "stdout") == "42\n", Str(s, "stderr"));
  BOOST_TEST(KernelPoolStat("active") == 0);
  BOOST_TEST(KernelPoolStat("hits") == 0);
  BOOST_TEST(CountPoolThings().total() == 0);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
