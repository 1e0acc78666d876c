// Snippets, sessions and input files through nginx (DESIGN.md §2, §6).
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "helpers.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

std::set<std::string> ExportedPaths(const rapidjson::Document& doc) {
  std::set<std::string> paths;
  for (const auto& f : doc["files"].GetArray()) paths.insert(f["path"].GetString());
  return paths;
}

std::string SessionRun(const std::string& user, const std::string& session,
                       const std::string& code) {
  return R"j({"language":"python","user":")j" + user + R"j(","session":")j" + session +
         R"j(","code":")j" + code + R"j("})j";
}

// The session directories of the stack (<state>/sessions/<user>/<session>, names derived by
// HMAC) whose files/`name` holds `content`.
std::vector<std::string> SessionDirsHolding(const std::string& name, const std::string& content) {
  namespace fs = std::filesystem;
  std::vector<std::string> found;
  const fs::path root = Stack::Get().state_dir() + "/sessions";
  std::error_code ec;
  for (const auto& user : fs::directory_iterator(root, ec)) {
    for (const auto& session : fs::directory_iterator(user.path(), ec)) {
      std::ifstream in(session.path() / "files" / name);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (in && text == content) found.push_back(session.path().string());
    }
  }
  return found;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(Workspaces)

BOOST_AUTO_TEST_CASE(snippets_share_workspace_and_tmp_in_order) {
  auto doc = PostRun(R"j({"snippets":[
      {"language":"bash","code":"echo 42 > /tmp/n; printf 'import json\\nV = 7\\n' > helper.py; echo setup"},
      {"language":"python","code":"import helper; print(open('/tmp/n').read().strip(), helper.V)"}]})j");
  BOOST_TEST(Str(doc, "status") == "ok");
  BOOST_TEST(Str(doc, "stdout").find("42 7") != std::string::npos);
  BOOST_TEST_REQUIRE(doc["snippets"].Size() == 2u);
  BOOST_TEST(Str(doc["snippets"][0], "stdout") == "setup\n");
  BOOST_TEST(Str(doc["snippets"][1], "status") == "ok");
  BOOST_TEST(Str(doc, "stdout").find("--- snippet 2 (python) ---") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(snippets_stop_at_first_failure_unless_asked) {
  auto doc = PostRun(R"j({"snippets":[
      {"language":"bash","code":"echo one; exit 4"},
      {"language":"bash","code":"echo two"}]})j");
  BOOST_TEST(Str(doc, "status") == "error");
  BOOST_TEST(Int(doc, "exit_code") == 4);
  BOOST_TEST(doc["snippets"].Size() == 1u);
  BOOST_TEST(Str(doc, "stdout").find("two") == std::string::npos);
  doc = PostRun(R"j({"continue_on_error":true,"snippets":[
      {"language":"bash","code":"echo one; exit 4"},
      {"language":"bash","code":"echo two"}]})j");
  BOOST_TEST(Str(doc, "status") == "error");  // the first failure's status
  BOOST_TEST(doc["snippets"].Size() == 2u);
  BOOST_TEST(Str(doc["snippets"][1], "stdout") == "two\n");
}

BOOST_AUTO_TEST_CASE(session_keeps_files_and_exports_only_new_ones) {
  auto first = PostRun(SessionRun("alice", "chat-a", "open('a.txt','w').write('A')"));
  BOOST_TEST(Str(first, "status") == "ok");
  BOOST_TEST(ExportedPaths(first) == std::set<std::string>{"a.txt"});
  // `_ =`: a last expression's value would be shown, as in a notebook.
  auto second = PostRun(SessionRun(
      "alice", "chat-a", "print(open('a.txt').read()); _ = open('b.txt','w').write('B')"));
  BOOST_TEST(Str(second, "stdout") == "A\n");
  BOOST_TEST(ExportedPaths(second) == std::set<std::string>{"b.txt"});
  // A changed file is exported again.
  auto third = PostRun(SessionRun("alice", "chat-a", "open('a.txt','w').write('A2')"));
  BOOST_TEST(ExportedPaths(third) == std::set<std::string>{"a.txt"});
}

// A save replaces the session's files by two renames (files -> files.old, files.next ->
// files). The state a crash between them leaves: files.old (the last complete copy), no
// files, and files.next (the new copy, perhaps partial). The next run of the session sees
// the previous files, and its save leaves the directory clean.
BOOST_AUTO_TEST_CASE(a_crash_between_the_renames_of_a_save_keeps_the_previous_files) {
  auto first = PostRun(SessionRun("gina", "crash", "open('kept.txt','w').write('before-crash')"));
  BOOST_TEST_REQUIRE(Str(first, "status") == "ok", Str(first, "stderr"));
  const auto dirs = SessionDirsHolding("kept.txt", "before-crash");
  BOOST_TEST_REQUIRE(dirs.size() == 1u);
  const std::string dir = dirs[0];
  namespace fs = std::filesystem;
  fs::rename(dir + "/files", dir + "/files.old");
  fs::create_directory(dir + "/files.next");
  std::ofstream(dir + "/files.next/kept.txt") << "half-writ";
  std::ofstream(dir + "/files.next/new.txt") << "from the lost save";
  auto next = PostRun(SessionRun(
      "gina", "crash", "import os; print(open('kept.txt').read(), os.path.exists('new.txt'))"));
  BOOST_TEST(Str(next, "status") == "ok", Str(next, "stderr"));
  BOOST_TEST(Str(next, "stdout") == "before-crash False\n");
  BOOST_TEST(fs::is_directory(dir + "/files"));
  BOOST_TEST(!fs::exists(dir + "/files.old"));
  BOOST_TEST(!fs::exists(dir + "/files.next"));
  // And the session goes on as ever.
  auto third = PostRun(SessionRun("gina", "crash", "print(open('kept.txt').read())"));
  BOOST_TEST(Str(third, "stdout") == "before-crash\n");
}

BOOST_AUTO_TEST_CASE(one_user_cannot_name_another_users_session) {
  PostRun(SessionRun("alice", "shared-name", "open('secret.txt','w').write('s')"));
  auto other =
      PostRun(SessionRun("mallory", "shared-name", "import os; print(sorted(os.listdir('.')))"));
  BOOST_TEST(Str(other, "stdout").find("secret.txt") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(runs_of_one_session_are_serialised) {
  // The first run holds the session for 1.5 s; the second waits (session_wait_s is 3 in the
  // test config) and then sees the first one's file.
  auto slow = std::async(std::launch::async, [] {
    return Post("/run",
                SessionRun("bob", "chat-b",
                           "import time; time.sleep(1.5); open('late.txt','w').write('L')"));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto waiting = PostRun(SessionRun("bob", "chat-b", "print(open('late.txt').read())"));
  BOOST_TEST(Str(waiting, "stdout") == "L\n");
  BOOST_TEST(slow.get().status == 200);
}

BOOST_AUTO_TEST_CASE(session_busy_past_the_wait_is_409) {
  auto slow = std::async(std::launch::async, [] {
    return Post("/run", SessionRun("carol", "chat-c", "import time; time.sleep(6)"));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  HttpResponse busy = Post("/run", SessionRun("carol", "chat-c", "print(1)"));
  BOOST_TEST(busy.status == 409);
  ServiceError err = ParseServiceError(busy.body);
  BOOST_TEST(err.code == "session_busy");
  BOOST_TEST(err.field == "session");
  BOOST_TEST(slow.get().status == 200);
}

BOOST_AUTO_TEST_CASE(session_from_headers) {
  httplib::Client client("127.0.0.1", Stack::Get().port());
  httplib::Headers headers = {{"X-Sandrun-User", "dave"}, {"X-Sandrun-Session", "chat-d"}};
  auto r1 = client.Post("/run", headers, R"j({"language":"bash","code":"echo x > kept.txt"})j",
                        "application/json");
  BOOST_TEST_REQUIRE(r1);
  auto r2 = client.Post("/run", headers, R"j({"language":"bash","code":"cat kept.txt"})j",
                        "application/json");
  BOOST_TEST_REQUIRE(r2);
  auto doc = ParseJson(r2->body);
  BOOST_TEST(Str(doc, "stdout") == "x\n");
}

BOOST_AUTO_TEST_CASE(input_files_are_placed_and_not_exported_unless_changed) {
  // "MSwyCg==" is "1,2\n".
  auto doc = PostRun(R"j({"language":"python","files":[
      {"path":"data/in.csv","content_base64":"MSwyCg=="},
      {"path":"keep.txt","content_base64":"aGk="}],
    "code":"print(open('data/in.csv').read().strip()); _ = open('keep.txt','a').write('!')"})j");
  BOOST_TEST(Str(doc, "status") == "ok");
  BOOST_TEST(Str(doc, "stdout") == "1,2\n");
  BOOST_TEST(ExportedPaths(doc) == std::set<std::string>{"keep.txt"});
}

BOOST_AUTO_TEST_CASE(hostile_input_paths_are_400_naming_the_field) {
  for (const char* path : {"../escape.txt", "/etc/cron.d/x", "a/../../b", ".sandrun/main.py"}) {
    HttpResponse r =
        Post("/run", std::string(R"j({"language":"bash","code":"true","files":[{"path":")j") +
                         path + R"j(","content_base64":"eA=="}]})j");
    BOOST_TEST(r.status == 400, path);
    BOOST_TEST(ParseServiceError(r.body).field == "files[0].path", path);
  }
}

BOOST_AUTO_TEST_CASE(input_file_cannot_be_written_through_a_planted_symlink) {
  // A session keeps no symlinks, so a link planted in one run is gone in the next, and
  // an input file named like it is written as a plain file inside the workspace.
  PostRun(SessionRun("erin", "chat-e", "import os; os.symlink('/etc', 'etc')"));
  auto doc = PostRun(R"j({"language":"bash","user":"erin","session":"chat-e",
      "files":[{"path":"etc/passwd","content_base64":"eA=="}],"code":"ls -la etc; cat etc/passwd"})j");
  BOOST_TEST(Str(doc, "status") == "ok");
  BOOST_TEST(Str(doc, "stdout").find("root:") == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration

namespace sandrun::integration {

// Runs with session_idle_s = 1 and janitor_interval_s = 1 (CMakeLists.txt).
BOOST_AUTO_TEST_SUITE(SessionExpiry)

BOOST_AUTO_TEST_CASE(idle_session_is_deleted_by_the_janitor) {
  auto first = PostRun(
      R"j({"language":"bash","user":"frank","session":"chat-f","code":"echo kept > note.txt"})j");
  BOOST_TEST(Str(first, "status") == "ok");
  // Polls until the janitor has swept the idle session (bounded; no duration asserted).
  bool gone = false;
  for (int i = 0; i < 30 && !gone; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    auto again =
        PostRun(R"j({"language":"bash","user":"frank","session":"chat-f-probe","code":"true"})j");
    (void)again;
    gone = ReadFile(Stack::Get().state_dir() + "/logs/sandrund.log").find("idle sessions") !=
           std::string::npos;
  }
  BOOST_TEST_REQUIRE(gone, "the janitor never reported removing an idle session");
  auto later = PostRun(R"j({"language":"bash","user":"frank","session":"chat-f","code":"ls"})j");
  BOOST_TEST(Str(later, "stdout").find("note.txt") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(metrics_report_runs_and_artifacts) {
  PostRun(RunRequest("bash", "echo x > out.txt"));
  bool counted = false;
  std::string metrics;
  for (int i = 0; i < 20 && !counted; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    metrics = Get("/metrics").body;
    counted = metrics.find("sandrun_artifact_files 0") == std::string::npos &&
              metrics.find("sandrun_artifact_files ") != std::string::npos;
  }
  BOOST_TEST(counted, metrics);
  BOOST_TEST(metrics.find("sandrun_runs_total{status=\"ok\"}") != std::string::npos);
  BOOST_TEST(metrics.find("sandrun_run_duration_seconds_bucket") != std::string::npos);
  BOOST_TEST(metrics.find("sandrun_sandboxes_active") != std::string::npos);
  // The runs above had no network: at least one started in a namespace made ahead.
  BOOST_TEST(metrics.find("sandrun_netns_ready_hits_total 0\n") == std::string::npos, metrics);
  BOOST_TEST(metrics.find("sandrun_netns_ready_hits_total ") != std::string::npos, metrics);
  BOOST_TEST(metrics.find("sandrun_netns_ready_failures_total 0\n") != std::string::npos, metrics);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
