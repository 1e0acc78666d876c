// Stateful Python: runs with "stateful": true go to their session's live
// IPython kernel. Through the real nginx and daemon, with a stack of their own
// (CMakeLists.txt: kernel_idle_s 6, max_kernels 2, so idle expiry and eviction are quick).
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "helpers.h"
#include "host_state.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

using Clock = std::chrono::steady_clock;

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// A stateful Python run of `user`'s `session`.
std::string Stateful(const std::string& user, const std::string& session, const std::string& code,
                     const std::map<std::string, int64_t>& limits = {}) {
  std::string body = R"({"language": "python", "stateful": true, "user": ")" + user +
                     R"(", "session": ")" + session + R"(", "code": ")" + Escape(code) + "\"";
  if (!limits.empty()) {
    body += R"(, "limits": {)";
    bool first = true;
    for (const auto& [k, v] : limits) {
      body += (first ? "\"" : ", \"") + k + "\": " + std::to_string(v);
      first = false;
    }
    body += "}";
  }
  return body + "}";
}

std::string KernelStatus(const rapidjson::Document& r) {
  if (!r.HasMember("kernel") || !r["kernel"].IsObject()) return "(no kernel)";
  return Str(r["kernel"], "status");
}

int64_t ExecutionCount(const rapidjson::Document& r) {
  if (!r.HasMember("kernel") || !r["kernel"].IsObject()) return -1;
  return Int(r["kernel"], "execution_count");
}

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The stack's kernel cgroups ("k-<hex>") that count CPU time: v1 cpuacct, v2 cpu.stat.
// (A sandbox sees only its own cgroup namespace: it cannot name its host directory.)
// (On a v1 host the socket cap's cgroup2 directory of a kernel has a cpu.stat too: only
// cpuacct counts there.)
std::set<std::string> KernelCpuCgroups() {
  std::set<std::string> out;
  struct statfs fs;
  const bool v2 = ::statfs("/sys/fs/cgroup", &fs) == 0 && fs.f_type == 0x63677270;
  for (const std::string& dir : RunCgroupDirs()) {
    const std::string name = dir.substr(dir.rfind('/') + 1);
    struct stat st;
    if (name.rfind("k-", 0) == 0 && (::stat((dir + "/cpuacct.usage").c_str(), &st) == 0 ||
                                     (v2 && ::stat((dir + "/cpu.stat").c_str(), &st) == 0))) {
      out.insert(dir);
    }
  }
  return out;
}

// CPU time (ns) the cgroup at `dir` has used, v1 cpuacct or v2 cpu.stat; -1 when unreadable.
int64_t CgroupCpuNs(const std::string& dir) {
  std::ifstream v1(dir + "/cpuacct.usage");
  int64_t ns = -1;
  if (v1 >> ns) return ns;
  std::ifstream in(dir + "/cpu.stat");
  std::string key;
  int64_t value = 0;
  while (in >> key >> value) {
    if (key == "usage_usec") return value * 1000;
  }
  return -1;
}

// v1: the freezer.state of the cgroup named like `dir` ("" without a freezer hierarchy).
std::string FreezerState(const std::string& dir) {
  const std::string name = dir.substr(dir.rfind('/') + 1);
  for (const std::string& d : RunCgroupDirs()) {
    if (d.substr(d.rfind('/') + 1) != name) continue;
    std::ifstream in(d + "/freezer.state");
    std::string word;
    if (in >> word) return word;
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(Kernels)

BOOST_AUTO_TEST_CASE(variables_and_imports_survive_between_runs) {
  auto first = PostRun(Stateful("alice", "vars", "import math\nx = 41\nprint('set')"));
  BOOST_TEST(Str(first, "status") == "ok", Str(first, "stderr"));
  BOOST_TEST(Str(first, "stdout") == "set\n");
  BOOST_TEST(KernelStatus(first) == "started");
  BOOST_TEST(ExecutionCount(first) == 1);
  auto second = PostRun(Stateful("alice", "vars", "print(x + 1, math.pi > 3)"));
  BOOST_TEST(Str(second, "status") == "ok", Str(second, "stderr"));
  BOOST_TEST(Str(second, "stdout") == "42 True\n");
  BOOST_TEST(KernelStatus(second) == "kept");
  BOOST_TEST(ExecutionCount(second) == 2);
  // A session's answer always says whether the session was lost (docs/CLUSTER.md), a
  // stateful one too.
  for (const auto* doc : {&first, &second}) {
    BOOST_TEST((doc->HasMember("session_restarted") && (*doc)["session_restarted"].IsBool() &&
                !(*doc)["session_restarted"].GetBool()));
    // The kernel's empty ~/.local/lib/.../site-packages is not news: nothing is skipped.
    BOOST_TEST_REQUIRE((*doc)["files_skipped"].IsArray());
    BOOST_TEST((*doc)["files_skipped"].Size() == 0u);
  }
  // A notebook's trailing expression is shown, and an exception is an error with its
  // traceback (no ANSI colour codes).
  auto shown = PostRun(Stateful("alice", "vars", "x * 2"));
  BOOST_TEST(Str(shown, "stdout") == "82\n");
  auto failed = PostRun(Stateful("alice", "vars", "1 / 0"));
  BOOST_TEST(Str(failed, "status") == "error");
  BOOST_TEST(Str(failed, "stderr").find("ZeroDivisionError") != std::string::npos);
  BOOST_TEST(Str(failed, "stderr").find('\x1b') == std::string::npos);
}

// `!cmd` and `%pip` need no terminal (the sandbox has none: IPython's system_raw), and a
// package `%pip install`ed by one cell imports in the next (the user site is on sys.path from
// the kernel's start). The wheel is made in the cell itself: this suite has no network.
BOOST_AUTO_TEST_CASE(shell_and_pip_magics_work_and_an_installed_package_imports_next) {
  auto shell = PostRun(Stateful("alice", "magics", "!echo shell-$((6*7))"));
  BOOST_TEST(Str(shell, "status") == "ok", Str(shell, "stderr"));
  BOOST_TEST(Str(shell, "stdout").find("shell-42") != std::string::npos, Str(shell, "stdout"));
  BOOST_TEST(Str(shell, "stderr").find("pty") == std::string::npos, Str(shell, "stderr"));
  auto present = PostRun(Stateful("alice", "magics", "%pip install numpy"));
  BOOST_TEST(
      Str(present, "stdout").find("Requirement already satisfied: numpy") != std::string::npos,
      Str(present, "stdout") << Str(present, "stderr"));
  // The setup left no name in the user's namespace.
  auto names = PostRun(Stateful("alice", "magics",
                                "print([n for n in ('ip', 'p', 'at', 'site') if n in globals()])"));
  BOOST_TEST(Str(names, "stdout") == "[]\n", Str(names, "stdout"));
  const std::string make_wheel =
      "import zipfile\n"
      "with zipfile.ZipFile('sandrun_magic-1.0-py3-none-any.whl', 'w') as z:\n"
      "    z.writestr('sandrun_magic.py', 'VALUE = 4242\\n')\n"
      "    z.writestr('sandrun_magic-1.0.dist-info/METADATA', "
      "'Metadata-Version: 2.1\\nName: sandrun-magic\\nVersion: 1.0\\n')\n"
      "    z.writestr('sandrun_magic-1.0.dist-info/WHEEL', "
      "'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n"
      "    z.writestr('sandrun_magic-1.0.dist-info/RECORD', '')\n"
      "%pip install --no-index sandrun_magic-1.0-py3-none-any.whl";
  auto installed = PostRun(Stateful("alice", "magics", make_wheel));
  BOOST_TEST(Str(installed, "stdout").find("Successfully installed sandrun-magic-1.0") !=
                 std::string::npos,
             Str(installed, "stdout") << Str(installed, "stderr"));
  auto imported =
      PostRun(Stateful("alice", "magics", "import sandrun_magic\nprint(sandrun_magic.VALUE)"));
  BOOST_TEST(Str(imported, "status") == "ok", Str(imported, "stderr"));
  BOOST_TEST(Str(imported, "stdout") == "4242\n");
  BOOST_TEST(KernelStatus(imported) == "kept");
}

BOOST_AUTO_TEST_CASE(stateful_without_session_is_refused) {
  HttpResponse r = Post("/run", R"({"language": "python", "code": "1", "stateful": true})");
  BOOST_TEST(r.status == 400, r.body);
  ServiceError e = ParseServiceError(r.body);
  BOOST_TEST(e.code == "missing_session");
  BOOST_TEST(e.field == "stateful");
  HttpResponse bad = Post("/run", R"({"language": "python", "code": "1", "stateful": "yes"})");
  BOOST_TEST(bad.status == 400, bad.body);
  BOOST_TEST(ParseServiceError(bad.body).field == "stateful");
  HttpResponse in =
      Post("/run", Stateful("alice", "vars", "input()").insert(1, R"("stdin": "x", )"));
  BOOST_TEST(in.status == 400, in.body);
  BOOST_TEST(ParseServiceError(in.body).field == "stdin");
}

BOOST_AUTO_TEST_CASE(two_users_sessions_never_share_a_kernel) {
  auto a = PostRun(Stateful("alice", "shared", "secret = 'alice-only'"));
  BOOST_TEST(Str(a, "status") == "ok", Str(a, "stderr"));
  auto b = PostRun(Stateful("bob", "shared", "print(globals().get('secret'))"));
  BOOST_TEST(Str(b, "status") == "ok", Str(b, "stderr"));
  BOOST_TEST(Str(b, "stdout") == "None\n");
  BOOST_TEST(KernelStatus(b) == "started");
  auto a2 = PostRun(Stateful("alice", "shared", "print(secret)"));
  BOOST_TEST(Str(a2, "stdout") == "alice-only\n");
}

BOOST_AUTO_TEST_CASE(files_written_are_exported_once_and_kept_in_the_session) {
  auto w = PostRun(Stateful("alice", "files", "open('out.txt', 'w').write('hello')"));
  BOOST_TEST(Str(w, "status") == "ok", Str(w, "stderr"));
  BOOST_TEST_REQUIRE(w["files"].Size() == 1u);
  BOOST_TEST(Str(w["files"][0], "path") == "out.txt");
  HttpResponse got = GetUrl(Str(w["files"][0], "url"));
  BOOST_TEST(got.status == 200);
  BOOST_TEST(got.body == "hello");
  // Unchanged: not exported again; still in the kernel's workspace.
  auto again = PostRun(Stateful("alice", "files", "print(open('out.txt').read())"));
  BOOST_TEST(Str(again, "stdout") == "hello\n");
  BOOST_TEST(again["files"].Size() == 0u);
  // The session's files are saved: a stateless run of the session sees them.
  auto stateless = PostRun(
      R"({"language": "bash", "code": "cat out.txt", "user": "alice", "session": "files"})");
  BOOST_TEST(Str(stateless, "stdout") == "hello");
}

BOOST_AUTO_TEST_CASE(figures_and_tables_are_displays) {
  const std::string code =
      "import matplotlib.pyplot as plt\nimport pandas as pd\n"
      "plt.plot([1, 2, 3])\nplt.show()\n"
      "pd.DataFrame({'city': ['Oslo', 'Rome'], 'n': [1, 2]})";
  auto r = PostRun(Stateful("alice", "plots", code));
  BOOST_TEST(Str(r, "status") == "ok", Str(r, "stderr"));
  BOOST_TEST_REQUIRE(r["displays"].IsArray());
  BOOST_TEST_REQUIRE(r["displays"].Size() == 2u);
  const auto& image = r["displays"][0];
  BOOST_TEST(Str(image, "kind") == "image");
  BOOST_TEST(Str(image, "mime") == "image/png");
  HttpResponse png = GetUrl(Str(image["file"], "url"));
  BOOST_TEST(png.status == 200);
  BOOST_TEST(png.body.substr(1, 3) == "PNG");
  const auto& table = r["displays"][1];
  // A trailing DataFrame is a Markdown table, as a program run's (sitecustomize's table),
  // and shown once: not also as text in stdout.
  BOOST_TEST(Str(table, "kind") == "table");
  BOOST_TEST(Str(table, "mime") == "text/markdown");
  BOOST_TEST(Str(table, "text") ==
             "|  | city | n |\n"
             "|---|---|---|\n"
             "| 0 | Oslo | 1 |\n"
             "| 1 | Rome | 2 |");
  BOOST_TEST(Str(r, "stdout").find("Oslo") == std::string::npos, Str(r, "stdout"));
  BOOST_TEST(Str(r, "stdout").find("<") == std::string::npos, Str(r, "stdout"));
  // The shown figure is a file of the run as well as a display (not in the workspace).
  BOOST_TEST_REQUIRE(r["files"].Size() == 1u);
  BOOST_TEST(Str(r["files"][0], "path") == "figure-1.png");
  BOOST_TEST(Str(r["files"][0], "sha256") == Str(image["file"], "sha256"));
  BOOST_TEST(Str(r["files"][0], "sha256") == Sha256Hex(png.body));
  // A second run of the session shows a Series the same way, and lists no stale figure.
  auto again = PostRun(Stateful("alice", "plots", "pd.Series([1.5, 2.5], name='x')"));
  BOOST_TEST(Str(again, "status") == "ok", Str(again, "stderr"));
  BOOST_TEST_REQUIRE(again["displays"].Size() == 1u);
  BOOST_TEST(Str(again["displays"][0], "text") == "|  | x |\n|---|---|\n| 0 | 1.5 |\n| 1 | 2.5 |");
  BOOST_TEST(Str(again, "stdout") == "");
  BOOST_TEST(again["files"].Size() == 0u);
}

BOOST_AUTO_TEST_CASE(input_in_a_stateful_cell_ends_in_eoferror) {
  auto r = PostRun(Stateful("alice", "input", "print('asking')\nname = input('Name? ')"));
  BOOST_TEST(Str(r, "status") == "error");
  BOOST_TEST(Str(r, "stdout") == "asking\nName? ");
  BOOST_TEST(Str(r, "stderr").find("EOFError") != std::string::npos, Str(r, "stderr"));
  BOOST_TEST(Str(r, "stderr").find("StdinNotImplementedError") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(timeout_interrupts_the_cell_and_the_kernel_stays_usable) {
  auto set = PostRun(Stateful("alice", "slow", "y = 5", {{"wall_time_s", 3}}));
  BOOST_TEST(Str(set, "status") == "ok", Str(set, "stderr"));
  const auto t = Clock::now();
  auto slow =
      PostRun(Stateful("alice", "slow", "import time\ntime.sleep(60)", {{"wall_time_s", 3}}));
  const double took = SecondsSince(t);
  BOOST_TEST(Str(slow, "status") == "timeout");
  BOOST_TEST(Str(slow, "stderr").find("KeyboardInterrupt") != std::string::npos,
             Str(slow, "stderr"));
  BOOST_TEST(Str(slow, "stderr").find("keeps its variables") != std::string::npos);
  BOOST_TEST(took < 10, "the cell was stopped near its wall limit");
  auto after = PostRun(Stateful("alice", "slow", "print(y)", {{"wall_time_s", 3}}));
  BOOST_TEST(Str(after, "stdout") == "5\n", Str(after, "stderr"));
  BOOST_TEST(KernelStatus(after) == "kept");
  // A cell that ignores the interrupt: the kernel is killed 2 s later, the next run gets a
  // new one and says why.
  auto deaf = PostRun(Stateful("alice", "slow",
                               "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                               "while True:\n    pass",
                               {{"wall_time_s", 3}}));
  BOOST_TEST(Str(deaf, "status") == "timeout");
  BOOST_TEST(Str(deaf, "stderr").find("the kernel was ended") != std::string::npos,
             Str(deaf, "stderr"));
  auto fresh = PostRun(Stateful("alice", "slow", "print('y' in globals())", {{"wall_time_s", 3}}));
  BOOST_TEST(Str(fresh, "stdout") == "False\n", Str(fresh, "stderr"));
  BOOST_TEST(KernelStatus(fresh) == "restarted");
}

BOOST_AUTO_TEST_CASE(a_kernel_killed_by_its_memory_limit_restarts_and_says_so) {
  const std::map<std::string, int64_t> limits = {{"memory_mb", 256}};
  auto set = PostRun(Stateful("alice", "oom", "z = 1", limits));
  BOOST_TEST(Str(set, "status") == "ok", Str(set, "stderr"));
  auto hog = PostRun(
      Stateful("alice", "oom", "b = []\nwhile True:\n    b.append(bytearray(16 << 20))", limits));
  BOOST_TEST(Str(hog, "status") == "memory_limit", Str(hog, "stderr"));
  // The answer says this run ended its kernel, as stderr does (kernel.status says how the
  // run got it: kept).
  BOOST_TEST_REQUIRE(hog.HasMember("kernel"));
  BOOST_TEST((hog["kernel"].HasMember("ended") && hog["kernel"]["ended"].GetBool()));
  BOOST_TEST(!set["kernel"]["ended"].GetBool());
  auto next = PostRun(Stateful("alice", "oom", "print('z' in globals())", limits));
  BOOST_TEST(Str(next, "stdout") == "False\n", Str(next, "stderr"));
  BOOST_TEST(KernelStatus(next) == "restarted");
  BOOST_TEST(Str(next, "stderr").find("memory_limit") != std::string::npos, Str(next, "stderr"));
}

// Walkthrough, 2026-12-03: one kernel message over 16 MiB (ZMQ_MAXMSGSIZE) dropped the iopub
// connection; the daemon waited for an idle status that never came, and the cell ended as a
// timeout with no word of why. Now: output_limit, a line saying so, the kernel ended (no later
// output would come back) and a fresh one for the next run.
BOOST_AUTO_TEST_CASE(one_message_over_16_mib_ends_the_cell_and_says_why) {
  auto big = PostRun(
      Stateful("alice", "huge", "x = 1\nprint('x' * 17_000_000)", {{"output_bytes", 64 << 20}}));
  BOOST_TEST(Str(big, "status") == "output_limit", Str(big, "stderr"));
  BOOST_TEST(Str(big, "stderr").find("output lost: the kernel sent one message over 16 MiB") !=
                 std::string::npos,
             Str(big, "stderr"));
  BOOST_TEST(big["kernel"]["ended"].GetBool());
  auto next = PostRun(Stateful("alice", "huge", "print('after')"));
  BOOST_TEST(Str(next, "status") == "ok", Str(next, "stderr"));
  BOOST_TEST(Str(next, "stdout") == "after\n");
  BOOST_TEST(KernelStatus(next) == "restarted");
}

// A cell that fills the session's disk is told which limit it was, as a stateless run is
// (StorageLimits); the kernel lives on, and a cell with room left gets no such line.
BOOST_AUTO_TEST_CASE(a_cell_that_fills_the_disk_is_told_which_limit_it_was) {
  const std::map<std::string, int64_t> limits = {{"disk_mb", 8}};
  auto full = PostRun(Stateful("alice", "disk",
                               "import errno\n"
                               "try:\n"
                               "    with open('fill.bin', 'wb') as f:\n"
                               "        f.write(bytes(20 << 20))\n"
                               "except OSError as e:\n"
                               "    print(errno.errorcode[e.errno])\n"
                               "kept = 1",
                               limits));
  BOOST_TEST(Str(full, "status") == "ok", Str(full, "stderr"));
  BOOST_TEST(Str(full, "stdout") == "ENOSPC\n", Str(full, "stderr"));
  BOOST_TEST(Str(full, "stderr")
                     .find("sandrun: the run's disk is full: the workspace and /tmp "
                           "share 8 MiB (disk_mb)") != std::string::npos,
             Str(full, "stderr"));
  auto freed =
      PostRun(Stateful("alice", "disk", "import os\nos.remove('fill.bin')\nprint(kept)", limits));
  BOOST_TEST(Str(freed, "stdout") == "1\n", Str(freed, "stderr"));
  BOOST_TEST(Str(freed, "stderr").find("disk is full") == std::string::npos, Str(freed, "stderr"));
}

// A cell that starts a busy loop in a session of its own (setsid) and returns: between cells
// the loop gets no CPU (the kernel's cgroup is frozen: its CPU time, read on the host, stays
// put), and it runs again during the next cell, which works as ever. Before, it ran on for
// the kernel's life, outside every run's CPU limit.
BOOST_AUTO_TEST_CASE(code_left_running_by_a_cell_gets_no_cpu_between_cells) {
  const std::string start = R"py(import os, subprocess, sys, time
loop = ("import os\nn = 0\nwhile True:\n    n += 1\n    if n % 100000 == 0:\n"
        "        open('/tmp/t', 'w').write(str(n))\n        os.replace('/tmp/t', '/tmp/tick')\n")
subprocess.Popen([sys.executable, '-c', loop], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
while not os.path.exists('/tmp/tick'):
    time.sleep(0.01)
print('started'))py";
  const std::set<std::string> earlier = KernelCpuCgroups();
  auto first = PostRun(Stateful("frank", "busy", start));
  BOOST_TEST_REQUIRE(Str(first, "status") == "ok", Str(first, "stderr"));
  std::vector<std::string> made;
  for (const std::string& dir : KernelCpuCgroups()) {
    if (earlier.count(dir) == 0) made.push_back(dir);
  }
  BOOST_TEST_REQUIRE(made.size() == 1u, "the new kernel's cgroup");
  const std::string cgroup = made[0];
  const int64_t before = CgroupCpuNs(cgroup);
  BOOST_TEST_REQUIRE(before >= 0, "no CPU counter in " << cgroup);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const int64_t after = CgroupCpuNs(cgroup);
  BOOST_TEST_MESSAGE("kernel CPU between cells over 500 ms: " << (after - before) / 1000 << " us");
  BOOST_TEST(after - before < 10'000'000,
             "the loop ran between cells: " << (after - before) / 1'000'000 << " ms of CPU");
  const std::string freezer = FreezerState(cgroup);
  BOOST_TEST((freezer.empty() || freezer == "FROZEN"), freezer);
  // The next cell works, and the loop runs during it.
  auto second = PostRun(Stateful("frank", "busy",
                                 "import time\n"
                                 "a = open('/tmp/tick').read()\n"
                                 "for _ in range(1000):\n"
                                 "    time.sleep(0.01)\n"
                                 "    if open('/tmp/tick').read() != a:\n"
                                 "        print('resumed')\n"
                                 "        break"));
  BOOST_TEST(Str(second, "status") == "ok", Str(second, "stderr"));
  BOOST_TEST(Str(second, "stdout") == "resumed\n", Str(second, "stderr"));
  BOOST_TEST(KernelStatus(second) == "kept");
  const int64_t again = CgroupCpuNs(cgroup);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  BOOST_TEST(CgroupCpuNs(cgroup) - again < 10'000'000);
  // A frozen kernel is ended whole (kernel_idle_s 6): thawed so its SIGKILL takes, its
  // cgroup removed.
  const auto t = Clock::now();
  struct stat st;
  while (::stat(cgroup.c_str(), &st) == 0 && SecondsSince(t) < 30) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  BOOST_TEST(::stat(cgroup.c_str(), &st) != 0, cgroup << " is still there 30 s later");
  BOOST_TEST(FreezerState(cgroup).empty(), "its freezer cgroup is gone too");
}

BOOST_AUTO_TEST_CASE(an_idle_kernel_ends_after_kernel_idle_s) {
  auto set = PostRun(Stateful("alice", "idle", "w = 1"));
  BOOST_TEST(Str(set, "status") == "ok", Str(set, "stderr"));
  std::this_thread::sleep_for(std::chrono::seconds(9));  // kernel_idle_s 6, checked each second
  auto next = PostRun(Stateful("alice", "idle", "print('w' in globals())"));
  BOOST_TEST(Str(next, "stdout") == "False\n");
  BOOST_TEST(KernelStatus(next) == "restarted");
  BOOST_TEST(Str(next, "stderr").find("kernel_idle_s") != std::string::npos, Str(next, "stderr"));
}

BOOST_AUTO_TEST_CASE(max_kernels_ends_the_least_recently_used) {
  for (const char* s : {"lru-1", "lru-2", "lru-3"}) {  // max_kernels 2: lru-1 goes
    auto r = PostRun(Stateful("carol", s, "v = 1"));
    BOOST_TEST(Str(r, "status") == "ok", Str(r, "stderr"));
  }
  auto back = PostRun(Stateful("carol", "lru-1", "print('v' in globals())"));
  BOOST_TEST(Str(back, "stdout") == "False\n");
  BOOST_TEST(KernelStatus(back) == "restarted");
  BOOST_TEST(Str(back, "stderr").find("max_kernels") != std::string::npos, Str(back, "stderr"));
  auto kept = PostRun(Stateful("carol", "lru-3", "print(v)"));
  BOOST_TEST(KernelStatus(kept) == "kept");
}

// Kernel start, then the per-run latency of a stateful print(1) next to a cold stateless
// run, through nginx (reported; the ratio is what to compare across machines).
BOOST_AUTO_TEST_CASE(latency_of_a_kept_kernel_next_to_a_cold_run) {
  const auto t0 = Clock::now();
  auto start = PostRun(Stateful("dave", "latency", "print(1)"));
  const double start_s = SecondsSince(t0);
  BOOST_TEST(Str(start, "stdout") == "1\n", Str(start, "stderr"));
  constexpr int kRuns = 5;
  double kept_s = 0, cold_s = 0;
  for (int i = 0; i < kRuns; ++i) {
    auto t = Clock::now();
    auto kept = PostRun(Stateful("dave", "latency", "print(1)"));
    kept_s += SecondsSince(t);
    BOOST_TEST(Str(kept, "stdout") == "1\n");
    t = Clock::now();
    auto cold = PostRun(RunRequest("python", "print(1)"));
    cold_s += SecondsSince(t);
    BOOST_TEST(Str(cold, "stdout") == "1\n");
  }
  BOOST_TEST_MESSAGE("kernel start (first stateful run): "
                     << start_s * 1000 << " ms; stateful print(1): " << kept_s * 1000 / kRuns
                     << " ms per run; cold stateless print(1): " << cold_s * 1000 / kRuns
                     << " ms per run; ratio cold/stateful " << cold_s / kept_s);
}

// A daemon killed (SIGKILL) while a kernel is frozen: init's death signal cannot take a frozen
// process (cgroup v1), so the daemon's thaw watch (sandbox/thaw_watch.h) thaws it and it ends
// by its lifeline, before any next start; that start's sweep removes its cgroups. The same
// for a kernel of the kernel pool.
BOOST_AUTO_TEST_CASE(a_kernel_frozen_when_the_daemon_is_killed_ends_with_the_daemon) {
  auto r = PostRun(Stateful("erin", "frozen-kill", "import threading\nfrozen = 1"));
  BOOST_TEST_REQUIRE(Str(r, "status") == "ok", Str(r, "stderr"));
  BOOST_TEST_REQUIRE(SandboxProcessCount() > 0, "the idle kernel lives between runs");
  // And a pooled kernel waits, frozen too (the default kernel_pool_size 1).
  WaitForKernelPoolFull();
  BOOST_TEST_REQUIRE(CountPoolThings(kKernelPoolPrefix).processes > 0, "a pooled kernel waits");
  const pid_t daemon = Stack::Get().DaemonPid();
  BOOST_TEST_REQUIRE(daemon > 0);
  kill(daemon, SIGKILL);
  // Before any restart (whose sweep would kill them anyway): the session's kernel and the
  // pooled one (SandboxProcessCount leaves out the pools' processes).
  auto left = [] { return SandboxProcessCount() + CountPoolThings(kKernelPoolPrefix).processes; };
  const auto killed = Clock::now();
  while (left() > 0 && SecondsSince(killed) < 10) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  BOOST_TEST(SandboxProcessCount() == 0, "the session's frozen kernel outlived the daemon");
  BOOST_TEST(CountPoolThings(kKernelPoolPrefix).processes == 0,
             "the pool's frozen kernel outlived the daemon");
  Stack::Get().Restart();
  const auto t = Clock::now();
  while ((SandboxProcessCount() > 0 || LeftoverRunCgroups() > 0) && SecondsSince(t) < 30) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  BOOST_TEST(SandboxProcessCount() == 0);
  BOOST_TEST(LeftoverRunCgroups() == 0);
  const PoolCounts pool = CountPoolThings(kKernelPoolPrefix);
  BOOST_TEST(pool.total() == 0, "the pooled kernel was swept too: processes "
                                    << pool.processes << ", cgroups " << pool.cgroups << ", dirs "
                                    << pool.dirs << ", mounts " << pool.mounts);
  auto after = PostRun(Stateful("erin", "frozen-kill", "print('frozen' in globals())"));
  BOOST_TEST(Str(after, "stdout") == "False\n", Str(after, "stderr"));
}

// Last: the daemon stops (SIGTERM) with live kernels and a full kernel pool; nothing of them
// is left on the host.
BOOST_AUTO_TEST_CASE(no_kernel_process_or_cgroup_outlives_the_daemon) {
  auto r = PostRun(Stateful("erin", "left", "q = 1"));
  BOOST_TEST(Str(r, "status") == "ok", Str(r, "stderr"));
  BOOST_TEST_REQUIRE(SandboxProcessCount() > 0, "the idle kernel lives between runs");
  WaitForKernelPoolFull();
  BOOST_TEST_REQUIRE(CountPoolThings(kKernelPoolPrefix).processes > 0, "a pooled kernel waits");
  BOOST_TEST(LeftoverRunCgroups() > 0);
  const pid_t daemon = Stack::Get().DaemonPid();
  BOOST_TEST_REQUIRE(daemon > 0);
  kill(daemon, SIGTERM);
  const auto t = Clock::now();
  while (ProcessAlive(daemon) && SecondsSince(t) < 30) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  BOOST_TEST(!ProcessAlive(daemon));
  BOOST_TEST(SandboxProcessCount() == 0);
  BOOST_TEST(LeftoverRunCgroups() == 0);
  BOOST_TEST(RunMountCount() == 0);
  const PoolCounts pool = CountPoolThings(kKernelPoolPrefix);
  BOOST_TEST(pool.total() == 0, "of the kernel pool: processes "
                                    << pool.processes << ", cgroups " << pool.cgroups << ", dirs "
                                    << pool.dirs << ", mounts " << pool.mounts);
  Stack::Get().Restart();
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
