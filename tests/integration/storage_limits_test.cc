// Named regression cases of the session store and exports,
// through the real nginx + daemon + sandbox. The suite's stack has a small per-user quota
// (CMakeLists.txt: 200 files, 16 MiB), so the budget refusals are cheap to reach; each case
// uses a user of its own, since sessions count against the user's quota.
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "helpers.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

struct TreeUsage {
  uint64_t entries = 0;
  uint64_t bytes_on_disk = 0;  // st_blocks * 512, each inode once
};

// What a directory of the host costs: entries and bytes on disk (not following symlinks).
TreeUsage HostUsage(const std::string& root) {
  TreeUsage usage;
  std::set<ino_t> seen;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    if (lstat(it->path().c_str(), &st) != 0) continue;
    ++usage.entries;
    if (seen.insert(st.st_ino).second)
      usage.bytes_on_disk += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return usage;
}

std::string SessionsDir() { return Stack::Get().state_dir() + "/sessions"; }

// A session run: bash `code` as (user, session), with limits.
std::string SessionBash(const std::string& user, const std::string& code,
                        const std::string& limits = "{}") {
  rapidjson::Document doc;
  doc.SetObject();
  auto& a = doc.GetAllocator();
  doc.AddMember("language", "bash", a);
  doc.AddMember("user", rapidjson::Value(user.c_str(), a), a);
  doc.AddMember("session", "chat", a);
  doc.AddMember("code", rapidjson::Value(code.c_str(), a), a);
  rapidjson::Document l;
  l.Parse(limits.c_str());
  doc.AddMember("limits", rapidjson::Value(l, a), a);
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  doc.Accept(writer);
  return buffer.GetString();
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string ReasonOf(const rapidjson::Value& doc, const std::string& path_suffix) {
  for (const auto& s : doc["files_skipped"].GetArray()) {
    const std::string path = s["path"].GetString();
    if (path.size() >= path_suffix.size() &&
        path.compare(path.size() - path_suffix.size(), path_suffix.size(), path_suffix) == 0) {
      return s["reason"].GetString();
    }
  }
  return "";
}

// The daemon's pid: the oldest process running sandrund with this stack's config.
pid_t DaemonPid() {
  const std::string config_arg = Stack::Get().state_dir() + "/sandrun.jsonc";
  pid_t found = -1;
  for (const auto& [pid, argv] : ProcessArgvs()) {
    for (size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == "--config" && argv[i + 1] == config_arg &&
          argv[0].find("sandrund") != std::string::npos && (found < 0 || pid < found)) {
        found = pid;
      }
    }
  }
  return found;
}

// A "VmHWM:" or "VmRSS:" line of /proc/<pid>/status, in KiB; -1 if absent.
int64_t ProcStatusKb(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1));
  }
  return -1;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(StorageLimits)

// 100 files truncated to 10 MiB in a 1 MiB workspace wrote 1 GB to the
// session store. Session copies keep holes now.
BOOST_AUTO_TEST_CASE(session_of_sparse_files_costs_its_blocks_not_its_size) {
  const TreeUsage before = HostUsage(SessionsDir());
  auto doc = PostRun(SessionBash(
      "sparse-user", "for i in $(seq 100); do truncate -s 10M f$i; done; du -sk . | cut -f1",
      R"({"disk_mb": 1})"));
  BOOST_TEST(!Contains(Str(doc, "stderr"), "session not saved"), Str(doc, "stderr"));
  const TreeUsage after = HostUsage(SessionsDir());
  BOOST_TEST_MESSAGE("session store on disk: " << before.bytes_on_disk << " -> "
                                               << after.bytes_on_disk << " bytes");
  BOOST_TEST(after.bytes_on_disk - before.bytes_on_disk < uint64_t{1} << 20);
  auto next = PostRun(SessionBash("sparse-user", "ls | wc -l; stat -c %s f42; du -sk . | cut -f1",
                                  R"({"disk_mb": 1})"));
  BOOST_TEST(Str(next, "status") == "ok", Str(next, "stderr"));
  BOOST_TEST(Contains(Str(next, "stdout"), "100\n10485760\n"), Str(next, "stdout"));
}

// One 9 MiB file with 60 hard links took 550 MiB of the session store.
// The inode is copied once and linked at its other names, in the store and on restore.
BOOST_AUTO_TEST_CASE(session_keeps_hard_links_as_links) {
  const TreeUsage before = HostUsage(SessionsDir());
  auto doc = PostRun(SessionBash("links-user",
                                 "mkdir .cache; head -c 9M /dev/urandom > .cache/big; "
                                 "for i in $(seq 59); do ln .cache/big .cache/l$i; done",
                                 R"({"disk_mb": 20})"));
  BOOST_TEST(Str(doc, "status") == "ok", Str(doc, "stderr"));
  BOOST_TEST(!Contains(Str(doc, "stderr"), "session not saved"), Str(doc, "stderr"));
  const TreeUsage after = HostUsage(SessionsDir());
  BOOST_TEST_MESSAGE("session store on disk: " << before.bytes_on_disk << " -> "
                                               << after.bytes_on_disk << " bytes");
  BOOST_TEST(after.bytes_on_disk - before.bytes_on_disk < uint64_t{11} << 20);
  auto next = PostRun(SessionBash("links-user",
                                  "stat -c %h .cache/big; cmp .cache/big .cache/l33 && echo same",
                                  R"({"disk_mb": 20})"));
  BOOST_TEST(Str(next, "stdout") == "60\nsame\n", Str(next, "stderr"));
}

// 100 000 empty files became 100 000 host inodes per request. A session
// over the user's quota (200 files here) is not saved: stderr says so, the old one stays,
// and the refused copy stopped at the budget.
BOOST_AUTO_TEST_CASE(session_over_the_quota_is_not_saved_and_the_previous_kept) {
  auto first = PostRun(SessionBash("many-user", "echo v1 > note.txt"));
  BOOST_TEST(Str(first, "status") == "ok");
  const TreeUsage before = HostUsage(SessionsDir());
  auto doc = PostRun(
      SessionBash("many-user",
                  "rm note.txt; mkdir -p .cache/m; cd .cache/m; "
                  "python3 -c \"[open(str(i), 'w').close() for i in range(100000)]\"; ls | wc -l",
                  R"({"wall_time_s": 60, "cpu_time_s": 60})"));
  BOOST_TEST(Str(doc, "stdout") == "100000\n", Str(doc, "stderr"));
  BOOST_TEST(Contains(Str(doc, "stderr"), "sandrun: session not saved: "), Str(doc, "stderr"));
  BOOST_TEST(Contains(Str(doc, "stderr"), "more than 200 files"), Str(doc, "stderr"));
  const TreeUsage after = HostUsage(SessionsDir());
  BOOST_TEST_MESSAGE("session store entries: " << before.entries << " -> " << after.entries);
  BOOST_TEST(after.entries <= before.entries + 5);
  auto next = PostRun(SessionBash("many-user", "cat note.txt; ls -a | wc -l"));
  BOOST_TEST(Str(next, "stdout") == "v1\n4\n", Str(next, "stdout"));  // . .. .sandrun note.txt
}

// A session over the byte quota (16 MiB here, bytes on disk) is refused.
BOOST_AUTO_TEST_CASE(session_over_the_byte_quota_is_not_saved) {
  auto doc = PostRun(SessionBash(
      "bytes-user", "mkdir .cache; head -c 20M /dev/urandom > .cache/blob", R"({"disk_mb": 30,
      "file_size_mb": 30})"));
  BOOST_TEST(Contains(Str(doc, "stderr"), "sandrun: session not saved: "), Str(doc, "stderr"));
  BOOST_TEST(Contains(Str(doc, "stderr"), "bytes on disk"), Str(doc, "stderr"));
  auto next = PostRun(SessionBash("bytes-user", "ls -d .cache 2>/dev/null | wc -l"));
  BOOST_TEST(Str(next, "stdout") == "0\n", Str(next, "stdout"));
}

// A run whose status is file_limit (its files over the quota) leaves the
// session as it was.
BOOST_AUTO_TEST_CASE(run_with_status_file_limit_does_not_save) {
  PostRun(SessionBash("limit-user", "echo v1 > note.txt"));
  auto doc =
      PostRun(SessionBash("limit-user", "rm note.txt; for i in $(seq 210); do echo $i > o$i; done",
                          R"({"max_files": 300})"));
  BOOST_TEST(Str(doc, "status") == "file_limit", Str(doc, "stderr"));
  BOOST_TEST(Contains(Str(doc, "stderr"), "session not saved: the run hit a file limit"),
             Str(doc, "stderr"));
  auto next = PostRun(SessionBash("limit-user", "cat note.txt; ls o1 2>&1 | wc -l"));
  BOOST_TEST(Contains(Str(next, "stdout"), "v1\n"), Str(next, "stdout"));
}

// Two 9 MiB sparse files in a disk_mb 1 run took 18 MiB of host disk.
BOOST_AUTO_TEST_CASE(sparse_files_are_exported_sparse) {
  const std::string artifacts = Stack::Get().artifacts_dir();
  const TreeUsage before = HostUsage(artifacts);
  auto doc = PostRun(R"({"language":"bash","user":"export-user","limits":{"disk_mb":1},
                         "code":"truncate -s 9M a.bin b.bin"})");
  BOOST_TEST(Str(doc, "status") == "ok", Str(doc, "stderr"));
  BOOST_TEST_REQUIRE(doc["files"].Size() == 2u);
  BOOST_TEST(Int(doc["files"][0], "size") == 9 << 20);
  const TreeUsage after = HostUsage(artifacts);
  BOOST_TEST_MESSAGE("artifact store on disk: " << before.bytes_on_disk << " -> "
                                                << after.bytes_on_disk << " bytes");
  BOOST_TEST(after.bytes_on_disk - before.bytes_on_disk < uint64_t{256} << 10);
  auto file = GetUrl(Str(doc["files"][0], "url"));
  BOOST_TEST(file.status == 200);
  BOOST_TEST(file.body == std::string(9 << 20, '\0'));
}

// A file 1000 directories deep was skipped as "too_many".
BOOST_AUTO_TEST_CASE(file_past_the_depth_bound_is_too_deep) {
  auto doc = PostRun(R"({"language":"bash","user":"deep-user",
      "code":"p=.; for i in $(seq 1000); do p=$p/d; done; mkdir -p $p; touch $p/f; echo made"})");
  BOOST_TEST(Str(doc, "stdout") == "made\n", Str(doc, "stderr"));
  std::string first_skipped = "d";
  for (int i = 1; i < 65; ++i) first_skipped += "/d";
  BOOST_TEST_REQUIRE(doc["files_skipped"].Size() == 1u);
  BOOST_TEST(Str(doc["files_skipped"][0], "path") == first_skipped);
  BOOST_TEST(Str(doc["files_skipped"][0], "reason") == "too_deep");
}

// 4000 empty files with long names in deep directories (max_files 4096)
// made a 263 MB response and a 947 MB daemon. The listed paths have a byte budget now.
BOOST_AUTO_TEST_CASE(response_with_long_paths_stays_small) {
  const std::string code =
      "import os\n"
      "d = '/'.join(['d' * 250] * 15)\n"  // 3764 bytes: under PATH_MAX
      "os.makedirs(d)\n"
      "for i in range(4000):\n"
      "    open(os.path.join(d, f'{i:04}' + 'n' * 200), 'w').close()\n"
      // 60 levels of 250 bytes, over PATH_MAX: made one level at a time.
      "top = os.getcwd()\n"
      "for _ in range(60):\n"
      "    os.mkdir('e' * 250)\n"
      "    os.chdir('e' * 250)\n"
      "for i in range(100):\n"
      "    open(str(i), 'w').close()\n"
      "os.chdir(top)\n";
  rapidjson::Document req;
  req.SetObject();
  auto& a = req.GetAllocator();
  req.AddMember("language", "python", a);
  req.AddMember("user", "long-user", a);
  req.AddMember("code", rapidjson::Value(code.c_str(), a), a);
  rapidjson::Value limits(rapidjson::kObjectType);
  limits.AddMember("max_files", 4096, a);
  req.AddMember("limits", limits, a);
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  req.Accept(writer);
  HttpResponse r = Post("/run", buffer.GetString());
  BOOST_TEST_REQUIRE(r.status == 200, r.body.substr(0, 500));
  auto doc = ParseJson(r.body);
  BOOST_TEST(Str(doc, "status") == "ok", Str(doc, "stderr"));
  const pid_t daemon = DaemonPid();
  BOOST_TEST_MESSAGE("response " << r.body.size() << " bytes, " << doc["files"].Size()
                                 << " files listed, " << doc["files_skipped"].Size()
                                 << " skipped listed; daemon VmHWM "
                                 << ProcStatusKb(daemon, "VmHWM") << " KiB, VmRSS "
                                 << ProcStatusKb(daemon, "VmRSS") << " KiB");
  BOOST_TEST(r.body.size() < size_t{4} << 20);
  BOOST_TEST(doc["files"].Size() > 0u);
  BOOST_TEST(doc["files"].Size() < 4000u);
  BOOST_TEST(ReasonOf(doc, "n") == "too_long");
  BOOST_TEST(Contains(Str(doc, "stderr"), "more skipped files are not listed"));
  BOOST_TEST_REQUIRE(daemon > 0);
  BOOST_TEST(ProcStatusKb(daemon, "VmHWM") < 256 * 1024);
}

// A child killed by the OOM killer while the program went on to exit 0 was
// reported as "stopped: memory limit".
BOOST_AUTO_TEST_CASE(child_killed_by_the_memory_limit_is_not_called_stopped) {
  auto doc = PostRun(R"({"language":"bash","user":"oom-user","limits":{"memory_mb":64},
      "code":"python3 -c 'x = bytearray(256 << 20)'; echo went on"})");
  BOOST_TEST(Str(doc, "stdout") == "went on\n", Str(doc, "stderr"));
  BOOST_TEST(Contains(Str(doc, "stderr"), "sandrun: a process was killed by the memory limit"),
             Str(doc, "stderr"));
  BOOST_TEST(!Contains(Str(doc, "stderr"), "stopped"), Str(doc, "stderr"));
}

// Hostile case file-09: a run that fills its disk gets ENOSPC like on any full disk, goes
// on, and is told which limit that was; a run that does not fill it hears nothing of it.
BOOST_AUTO_TEST_CASE(a_run_that_fills_its_disk_is_told_which_limit_it_was) {
  auto full = PostRun(R"({"language":"bash","limits":{"disk_mb":8},
      "code":"head -c 20M /dev/zero > fill.bin; echo \"head: $?\""})");
  BOOST_TEST(Str(full, "status") == "ok", Str(full, "stderr"));
  BOOST_TEST(Str(full, "stdout") == "head: 1\n", Str(full, "stderr"));
  BOOST_TEST(Contains(Str(full, "stderr"), "No space left on device"), Str(full, "stderr"));
  BOOST_TEST(Contains(Str(full, "stderr"),
                      "sandrun: the run's disk is full: the workspace and /tmp share 8 MiB "
                      "(disk_mb)"),
             Str(full, "stderr"));
  auto roomy = PostRun(R"({"language":"bash","limits":{"disk_mb":8},
      "code":"head -c 1M /dev/zero > some.bin; echo written"})");
  BOOST_TEST(Str(roomy, "stdout") == "written\n");
  BOOST_TEST(!Contains(Str(roomy, "stderr"), "disk is full"), Str(roomy, "stderr"));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
