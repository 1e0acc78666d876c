// Prepared environments, against the fake internet of fake_internet.py (its
// own octet, index only). Suite Environments: "network": "on_request", the index allowed and
// named (tests/integration/CMakeLists.txt), environments_max_mb 1 and a janitor every second
// (eviction). Suite EnvironmentsOff: "network": "off" with environments_prebuild.
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <thread>

#include "fake_internet.h"
#include "helpers.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

using Clock = std::chrono::steady_clock;

struct EnvironmentsInternet : FakeInternet {
  EnvironmentsInternet() : FakeInternet(78, true) {}
};
struct EnvironmentsOffInternet : FakeInternet {
  EnvironmentsOffInternet() : FakeInternet(79, true) {}
};

std::string ImportCode(const FakeInternet& net) {
  return "import " + net.S("module") + "; print(" + net.S("module") + ".VALUE)";
}

// A run of the fixture's module with `packages` (a JSON array).
std::string WithPackages(const std::string& packages, const std::string& code) {
  return R"({"packages": )" + packages + R"(, "language": "python", "code": ")" + code + "\"}";
}

// A /run body of `markdown`, with `extra` members (`"network": true`) when given.
std::string MarkdownBody(const std::string& markdown, const std::string& extra = "") {
  rapidjson::Document body;
  body.SetObject();
  body.AddMember("markdown", rapidjson::Value(markdown.c_str(), body.GetAllocator()),
                 body.GetAllocator());
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  body.Accept(w);
  std::string text = buf.GetString();
  if (!extra.empty()) text.insert(text.size() - 1, ", " + extra);
  return text;
}

// A message that installs `install` (what follows `pip install`) and prints `module`.VALUE.
std::string InstallAndPrint(const std::string& install, const std::string& module) {
  return "```bash\npip install " + install + "\n```\n\n```python\nimport " + module + "; print(" +
         module + ".VALUE)\n```\n";
}

int64_t Ms(Clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count();
}

// How many times the index served the wheel of `module` (one download per build: pip runs
// with --no-cache-dir).
int WheelDownloads(const FakeInternet& net, const std::string& module) {
  const std::string log = net.IndexLog(), wheel = "GET /simple/";
  int n = 0;
  for (size_t at = log.find(wheel); at != std::string::npos; at = log.find(wheel, at + 1)) {
    const size_t end = log.find('\n', at);
    const std::string line = log.substr(at, end - at);
    if (line.find(module + "-1.0-py3-none-any.whl") != std::string::npos) ++n;
  }
  return n;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string EnvironmentDir(const std::string& id) {
  return Stack::Get().state_dir() + "/environments/" + id;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(Environments, *boost::unit_test::fixture<EnvironmentsInternet>())

BOOST_AUTO_TEST_CASE(a_set_is_built_once_then_served_from_the_cache) {
  const FakeInternet& net = Net();
  const std::string body = WithPackages("[\"" + net.S("package") + "\"]", ImportCode(net));
  auto start = Clock::now();
  auto first = PostRun(body);
  const int64_t build_ms = Ms(start);
  BOOST_TEST_REQUIRE(first.HasMember("environment"), Str(first, "stderr"));
  BOOST_TEST(Str(first, "status") == "ok", Str(first, "stderr"));
  BOOST_TEST(Str(first, "stdout") == net.S("value") + "\n");
  BOOST_TEST(Str(first["environment"], "status") == "built");
  BOOST_TEST(Int(first["environment"], "build_ms") > 0);
  BOOST_TEST(first["environment"]["packages"][0].GetString() == net.S("package"));
  start = Clock::now();
  auto second = PostRun(body);
  const int64_t cached_ms = Ms(start);
  BOOST_TEST(Str(second, "stdout") == net.S("value") + "\n", Str(second, "stderr"));
  BOOST_TEST(Str(second["environment"], "status") == "cached");
  BOOST_TEST(Str(second["environment"], "id") == Str(first["environment"], "id"));
  BOOST_TEST_MESSAGE("environment: first request (build) "
                     << build_ms << " ms (build_ms " << Int(first["environment"], "build_ms")
                     << "), second (cached) " << cached_ms << " ms");
  // The cached path was taken: "cached" above, the same build reported (its build_ms), and
  // the index served the wheel once, to the first request's build. (What the cache wins in
  // time is measured by scripts/bench --environments, docs/BENCHMARKS.md.)
  BOOST_TEST(Int(second["environment"], "build_ms") == Int(first["environment"], "build_ms"));
  BOOST_TEST(WheelDownloads(net, net.S("module")) == 1, net.IndexLog());
  // Read-only inside the run.
  auto write = PostRun(WithPackages("[\"" + net.S("package") + "\"]",
                                    "import " + net.S("module") + ", os; p = os.path.dirname(" +
                                        net.S("module") + ".__file__); open(p + '/x', 'w')"));
  BOOST_TEST(Str(write, "stderr").find("Read-only file system") != std::string::npos,
             Str(write, "stderr"));
}

BOOST_AUTO_TEST_CASE(a_markdown_pip_block_is_satisfied_by_a_present_environment) {
  const FakeInternet& net = Net();
  // Made by the case above (or here, if it ran alone).
  (void)PostRun(WithPackages("[\"" + net.S("package") + "\"]", "pass"));
  auto run = PostRun(MarkdownBody(InstallAndPrint(net.S("package"), net.S("module"))));
  BOOST_TEST(Str(run, "status") == "ok", Str(run, "stderr"));
  BOOST_TEST(Str(run, "stdout").find(net.S("value")) != std::string::npos, Str(run, "stdout"));
  BOOST_TEST_REQUIRE(run.HasMember("environment"));
  BOOST_TEST(Str(run["environment"], "status") == "cached");
  BOOST_TEST(Str(run["snippets"][0], "budget") == "environment");
  BOOST_TEST(Str(run["snippets"][0], "stdout").find("prepared environment") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(eight_concurrent_requests_build_once) {
  const FakeInternet& net = Net();
  const int before = WheelDownloads(net, net.S("module"));
  const std::string body = WithPackages("[\"" + net.S("package") + "==1.0\"]", ImportCode(net));
  std::vector<std::future<HttpResponse>> runs;
  for (int i = 0; i < 8; ++i) {
    runs.push_back(std::async(std::launch::async, [&] { return Post("/run", body); }));
  }
  int ok = 0, building = 0;
  for (auto& f : runs) {
    const HttpResponse r = f.get();
    if (r.status == 200) {
      auto doc = ParseJson(r.body);
      BOOST_TEST(Str(doc, "stdout") == net.S("value") + "\n", r.body);
      ++ok;
    } else {
      // Past the bounded waiters: told to come back (never a worker thread held for it).
      BOOST_TEST(r.status == 503, r.body);
      BOOST_TEST(ParseServiceError(r.body).code == "environment_building");
      BOOST_TEST(!r.Header("retry-after").empty());
      ++building;
    }
  }
  BOOST_TEST_MESSAGE("8 concurrent requests: " << ok << " ran, " << building
                                               << " told environment_building");
  BOOST_TEST(ok >= 1);
  BOOST_TEST(WheelDownloads(net, net.S("module")) - before == 1);
}

BOOST_AUTO_TEST_CASE(invalid_packages_are_refused_naming_the_entry) {
  for (const std::string bad :
       {R"(["--index-url=http://198.18.78.2/evil"])", R"(["-e ."])", R"(["file:///etc/passwd"])",
        R"(["git+https://example.invalid/x"])", R"(["../x"])", R"(["pkg @ http://x/y.whl"])",
        R"(["pkg\u0000"])", R"(["numpy; os_name == 'nt'"])"}) {
    auto r = Post("/run", R"({"packages": )" + bad + R"(, "language": "bash", "code": "true"})");
    BOOST_TEST(r.status == 400, bad << ": " << r.body);
    auto e = ParseServiceError(r.body);
    BOOST_TEST(e.code == "invalid_package", bad);
    BOOST_TEST(e.field == "packages");
    BOOST_TEST(e.message.find("package '") != std::string::npos, e.message);
  }
  std::string many = "[";
  for (int i = 0; i < 40; ++i) many += (i ? ",\"p" : "\"p") + std::to_string(i) + "\"";
  auto r = Post("/run", R"({"packages": )" + many + R"(], "language": "bash", "code": "true"})");
  BOOST_TEST(r.status == 400);
  BOOST_TEST(ParseServiceError(r.body).code == "invalid_package");
  auto type = Post("/run", R"({"packages": "numpy", "language": "bash", "code": "true"})");
  BOOST_TEST(ParseServiceError(type.body).code == "wrong_type");
}

BOOST_AUTO_TEST_CASE(a_failed_build_is_remembered_with_pip_output) {
  const FakeInternet& net = Net();
  const std::string body = WithPackages("[\"" + net.S("package") + "==9.9\"]", ImportCode(net));
  auto first = PostRun(body);
  BOOST_TEST(Str(first, "status") == "error");
  BOOST_TEST_REQUIRE(first.HasMember("environment"), Str(first, "stderr"));
  BOOST_TEST(Str(first["environment"], "status") == "failed");
  const std::string err = Str(first, "stderr");
  BOOST_TEST(err.find("could not be built") != std::string::npos, err);
  BOOST_TEST(err.find("No matching distribution") != std::string::npos, err);
  const auto start = Clock::now();
  auto second = PostRun(body);
  BOOST_TEST(Str(second["environment"], "status") == "failed");
  BOOST_TEST(Str(second, "stderr").find("remembered") != std::string::npos);
  BOOST_TEST_MESSAGE("remembered failure answered in " << Ms(start) << " ms");
}

// Another user's environment holds what a message's install step asks for, and more: a
// distribution of theirs could ship the asked-for modules (pip --target puts all in one
// directory), so the message is not served from it. An environment of exactly the set is.
BOOST_AUTO_TEST_CASE(an_environment_is_served_only_to_the_set_it_was_built_from) {
  const FakeInternet& net = Net();
  const std::string plain = net.S("plain_package"), module = "sandrun_plain";
  auto other =
      PostRun(WithPackages("[\"" + plain + "\", \"" + net.S("bulk_package") + "\"]", "pass"));
  BOOST_TEST_REQUIRE(other.HasMember("environment"), Str(other, "stderr"));
  const std::string other_id = Str(other["environment"], "id");
  BOOST_TEST(Exists(EnvironmentDir(other_id)));
  auto victim = PostRun(MarkdownBody(InstallAndPrint(plain, module), "\"network\": true"));
  BOOST_TEST(Str(victim, "status") == "ok", Str(victim, "stderr"));
  BOOST_TEST(!victim.HasMember("environment"), Str(victim, "stdout"));
  BOOST_TEST(Str(victim["snippets"][0], "budget") == "install");
  BOOST_TEST(Str(victim, "stdout").find(net.S("value")) != std::string::npos,
             Str(victim, "stdout"));
  // Exactly its set, built by anyone: served.
  auto exact = PostRun(WithPackages("[\"" + plain + "\"]", "pass"));
  BOOST_TEST_REQUIRE(exact.HasMember("environment"), Str(exact, "stderr"));
  auto served = PostRun(MarkdownBody(InstallAndPrint(plain, module)));
  BOOST_TEST(Str(served, "status") == "ok", Str(served, "stderr"));
  BOOST_TEST_REQUIRE(served.HasMember("environment"), Str(served, "stdout"));
  BOOST_TEST(Str(served["environment"], "id") == Str(exact["environment"], "id"));
  BOOST_TEST(Str(served["snippets"][0], "budget") == "environment");
  // A version the set did not name is not that set.
  auto pinned = PostRun(MarkdownBody(InstallAndPrint("'" + plain + "==1.0'", module)));
  BOOST_TEST(!pinned.HasMember("environment"), Str(pinned, "stdout"));
}

// A distribution that ships another's files (sandrun-evil depends on the fixture and ships
// its module): the build is refused, naming both; nothing runs.
BOOST_AUTO_TEST_CASE(a_build_where_one_distribution_overwrites_anothers_files_is_refused) {
  const FakeInternet& net = Net();
  const std::string evil = net.S("evil_package"), fixture = net.S("package");
  for (const std::string& set : {"[\"" + evil + "\"]", "[\"" + fixture + "\", \"" + evil + "\"]"}) {
    auto doc = PostRun(WithPackages(set, ImportCode(net)));
    BOOST_TEST(Str(doc, "status") == "error", set);
    BOOST_TEST_REQUIRE(doc.HasMember("environment"), Str(doc, "stderr"));
    BOOST_TEST(Str(doc["environment"], "status") == "failed");
    const std::string err = Str(doc, "stderr");
    for (const std::string& part : {std::string("refused"), evil + " 1.0", fixture + " 1.0",
                                    net.S("module") + "/__init__.py"}) {
      BOOST_TEST(err.find(part) != std::string::npos, set << ": " << part << " in " << err);
    }
    BOOST_TEST(Str(doc, "stdout").find(net.S("evil_value")) == std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(the_janitor_evicts_the_least_recently_used_past_the_cap) {
  const FakeInternet& net = Net();
  const std::string bulk = net.S("bulk_package");
  auto a = PostRun(WithPackages("[\"" + bulk + "\"]", "import sandrun_bulk"));
  BOOST_TEST_REQUIRE(a.HasMember("environment"), Str(a, "stderr"));
  const std::string a_id = Str(a["environment"], "id");
  BOOST_TEST(Exists(EnvironmentDir(a_id)));
  auto b = PostRun(WithPackages("[\"" + bulk + "==1.0\"]", "import sandrun_bulk"));
  BOOST_TEST_REQUIRE(b.HasMember("environment"), Str(b, "stderr"));
  const std::string b_id = Str(b["environment"], "id");
  // Two of ~700 KB are over environments_max_mb 1: the janitor (every second) removes the
  // least recently used ones until under it, `a` among them; `b`, the newest, stays.
  for (int i = 0; i < 100 && Exists(EnvironmentDir(a_id)); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  BOOST_TEST(!Exists(EnvironmentDir(a_id)));
  BOOST_TEST(Exists(EnvironmentDir(b_id)));
  auto again = PostRun(WithPackages("[\"" + bulk + "\"]", "import sandrun_bulk"));
  BOOST_TEST(Str(again["environment"], "status") == "built");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(EnvironmentsOff, *boost::unit_test::fixture<EnvironmentsOffInternet>())

BOOST_AUTO_TEST_CASE(only_prebuilt_sets_are_served) {
  const FakeInternet& net = Net();
  // The stack started before the fake internet was up, so its prebuild found no index:
  // start the daemon again now that the index answers.
  Stack& stack = Stack::Get();
  ::kill(stack.DaemonPid(), SIGTERM);
  stack.Restart();
  auto doc = PostRun(WithPackages("[\"" + net.S("package") + "\"]", ImportCode(net)));
  BOOST_TEST(Str(doc, "status") == "ok", Str(doc, "stderr"));
  BOOST_TEST(Str(doc, "stdout") == net.S("value") + "\n");
  BOOST_TEST_REQUIRE(doc.HasMember("environment"));
  const std::string status = Str(doc["environment"], "status");
  BOOST_TEST((status == "built" || status == "cached"), status);
  auto r = Post("/run", WithPackages("[\"" + net.S("package") + "==1.0\"]", ImportCode(net)));
  BOOST_TEST(r.status == 403, r.body);
  auto e = ParseServiceError(r.body);
  BOOST_TEST(e.code == "network_forbidden");
  BOOST_TEST(e.field == "packages");
  BOOST_TEST(e.message.find("environments_prebuild") != std::string::npos, e.message);
}

// The admin's sets (environments_prebuild) serve a message whose install step asks for
// any of their packages by name; a version they did not name is not served.
BOOST_AUTO_TEST_CASE(an_admin_set_serves_a_bare_name_it_holds) {
  const FakeInternet& net = Net();
  const std::string plain = net.S("plain_package"), module = "sandrun_plain";
  const std::string admin =
      WithPackages("[\"" + net.S("bulk_package") + "\", \"" + plain + "\"]", "pass");
  // Present or being built since the daemon started (waited for); 403 only when this case
  // runs alone, before the index was up at start.
  if (Post("/run", admin).status == 403) {
    Stack& stack = Stack::Get();
    ::kill(stack.DaemonPid(), SIGTERM);
    stack.Restart();
  }
  auto set = PostRun(admin);
  BOOST_TEST_REQUIRE(set.HasMember("environment"), Str(set, "stderr"));
  auto served = PostRun(MarkdownBody(InstallAndPrint(plain, module)));
  BOOST_TEST(Str(served, "status") == "ok", Str(served, "stderr"));
  BOOST_TEST(Str(served, "stdout").find(net.S("value")) != std::string::npos,
             Str(served, "stdout"));
  BOOST_TEST_REQUIRE(served.HasMember("environment"), Str(served, "stdout"));
  BOOST_TEST(Str(served["environment"], "id") == Str(set["environment"], "id"));
  BOOST_TEST(Str(served["snippets"][0], "budget") == "environment");
  auto pinned = PostRun(MarkdownBody(InstallAndPrint("'" + plain + "==1.0'", module)));
  BOOST_TEST(!pinned.HasMember("environment"), Str(pinned, "stdout"));
  BOOST_TEST(Str(pinned["snippets"][0], "budget") == "install");
  BOOST_TEST(Str(pinned, "status") == "error", Str(pinned, "stdout"));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
