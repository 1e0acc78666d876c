// The zygote (config `zygote`, sandbox/zygote.h): stateless Python runs start from a Python
// started once and forked into each new sandbox. This suite's stack has {"zygote": true,
// "pool": {}}: a stateless run of one Python program starts from the zygote; the same run
// with a fresh session starts cold (a held session does not fit the zygote), so each case
// runs both ways and compares what the user sees. The loader's own file names tell which way a
// run went (the zygote imported it from the host's copy: a documented difference).
#include <fcntl.h>
#include <signal.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "helpers.h"
#include "host_state.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

const char kWhichWay[] =
    "import sandrun_loader\n"
    "print('cold' if sandrun_loader._OWN_FILES[0].startswith('/home/user/') else 'zygote')\n";

// `extra`: more members of the body (", \"stdin\": ...").
std::string Body(const std::string& code, const std::string& session,
                 const std::string& extra = "") {
  std::string body = "{\"language\": \"python\", \"code\": " + Q(code) + extra;
  if (!session.empty()) body += ", \"session\": " + Q(session);
  return body + "}";
}

int session_counter = 0;

// Runs `code` from the zygote and cold; checks which way each went.
// A program that does not compile prints nothing: `check_way` false.
std::pair<rapidjson::Document, rapidjson::Document> ZygoteAndCold(const std::string& code,
                                                                  bool check_way = true,
                                                                  const std::string& extra = "") {
  const std::string session = "zygote-diff-" + std::to_string(++session_counter);
  rapidjson::Document zygote = PostRun(Body(std::string(kWhichWay) + code, "", extra));
  rapidjson::Document cold = PostRun(Body(std::string(kWhichWay) + code, session, extra));
  if (check_way) {
    BOOST_TEST(Str(zygote, "stdout").rfind("zygote\n", 0) == 0, Str(zygote, "stdout"));
    BOOST_TEST(Str(cold, "stdout").rfind("cold\n", 0) == 0, Str(cold, "stdout"));
  }
  return {std::move(zygote), std::move(cold)};
}

std::string After(const std::string& s) { return s.substr(s.find('\n') + 1); }

// This stack's processes from the zygotes on: the run zygote, the kernel zygote (config
// kernel_zygote, on by default: the same script with --kernel), both host root, and the
// sandbox uid's (a run's program, its init).
struct ZygoteStackProcesses {
  int run_zygotes = 0, kernel_zygotes = 0, sandbox = 0;
  int zygote_programs = 0;  // of `sandbox`: run programs the run zygote forked (its argv)
  int total() const { return run_zygotes + kernel_zygotes + sandbox; }
};

ZygoteStackProcesses CountStackProcesses() {
  ZygoteStackProcesses n;
  const std::string zygote = Stack::Get().state_dir() + "/runs/.zygote/sandrun_zygote.py";
  const std::string uid = std::to_string(Stack::Get().sandbox_uid());
  const std::string root = std::to_string(Stack::Get().sandbox_uid() + 1);
  for (const auto& [pid, argv] : ProcessArgvs()) {
    const std::string status = ReadFile("/proc/" + std::to_string(pid) + "/status");
    const size_t at = status.find("\nUid:\t");
    if (at == std::string::npos) continue;
    const std::string real = status.substr(at + 6, status.find('\t', at + 6) - at - 6);
    const bool zygotes = argv.size() > 1 && argv[1] == zygote;
    const bool kernel = std::find(argv.begin(), argv.end(), "--kernel") != argv.end();
    if (real == uid || real == root) {
      ++n.sandbox;  // a program the zygote forked keeps its command line: counted here
      if (zygotes && !kernel) ++n.zygote_programs;
    } else if (zygotes) {
      ++(kernel ? n.kernel_zygotes : n.run_zygotes);
    }
  }
  return n;
}

// The cgroup2 mount the daemon reconfigures (sandbox/cgroup.h FavorDynamicModifications).
std::string Cgroup2Mount() {
  struct statfs fs;
  return ::statfs("/sys/fs/cgroup", &fs) == 0 && fs.f_type == 0x63677270 ? "/sys/fs/cgroup"
                                                                         : "/sys/fs/cgroup/unified";
}

// Its super options ("rw,nsdelegate,..."), "" without one.
std::string Cgroup2Options(const std::string& mount) {
  std::istringstream info(ReadFile("/proc/self/mountinfo"));
  std::string line;
  while (std::getline(info, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    fields >> id >> parent >> dev >> root >> point;
    const size_t dash = line.find(" - cgroup2 ");
    if (point == mount && dash != std::string::npos) return line.substr(line.rfind(' ') + 1);
  }
  return "";
}

// Sets the mount's options to `options` but favordynmods (fspick, fsconfig).
bool Cgroup2WithoutFavor(const std::string& mount, const std::string& options) {
  const int fd = static_cast<int>(::syscall(SYS_fspick, AT_FDCWD, mount.c_str(), 1));
  if (fd < 0) return false;
  std::istringstream list(options);
  std::string option;
  bool ok = true;
  while (std::getline(list, option, ',')) {
    if (option == "rw" || option == "ro" || option == "favordynmods" || option.empty()) continue;
    ok = ok && ::syscall(SYS_fsconfig, fd, 0 /*SET_FLAG*/, option.c_str(), nullptr, 0) == 0;
  }
  ok = ok && ::syscall(SYS_fsconfig, fd, 7 /*CMD_RECONFIGURE*/, nullptr, nullptr, 0) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(Zygote)

// What a program sees of its interpreter and its process is a fresh Python's: the cold start
// is the reference (warm_pool_test.cc's cases, and the process's own state).
BOOST_AUTO_TEST_CASE(a_zygote_run_is_a_cold_one) {
  const std::vector<std::string> programs = {
      "def f():\n    raise ValueError('boom')\n\nf()\n",
      "import sys\nprint(__name__, sys.argv, sys.orig_argv, __file__, sys.path)\n"
      "if __name__ == '__main__':\n    print('as main')\n",
      "x = 20\nx + 22\n",
      "import sys\nprint('bye')\nsys.exit(3)\n",
      "import sys\nsys.exit('a message')\n",
      "print('a'\n",
      "import resource as r\nprint([r.getrlimit(getattr(r, n)) for n in dir(r) "
      "if n.startswith('RLIMIT_')])\n",
      "import sys, os\nprint(sys.flags, os.getppid(), os.getpid() > 1, os.getcwd(), "
      "os.getuid(), os.getgid(), os.getgroups(), sorted(os.environ.items()))\n",
      "import signal\nprint([(s.name, signal.getsignal(s)) for s in signal.valid_signals() "
      "if isinstance(s, signal.Signals) and s not in (signal.SIGKILL, signal.SIGSTOP)])\n"
      "print(signal.pthread_sigmask(signal.SIG_BLOCK, []))\n",
      "import os\n"
      "st = open('/proc/self/status').read().splitlines()\n"
      "print([l for l in st if l.split(':')[0] in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', "
      "'CapAmb', 'NoNewPrivs', 'Seccomp', 'SigIgn', 'SigBlk')])\n"
      "print(open('/proc/self/oom_score_adj').read(), os.readlink('/proc/self/exe'))\n",
      // The modules the zygote's own start imported beyond a fresh start's (DESIGN.md).
      "import sys\nprint(sorted(set(sys.modules) - {'gc', 'collections', 'contextlib', "
      "'functools', 'importlib._abc', 'importlib.util', 'itertools', 'keyword', 'operator', "
      "'reprlib', '_collections', '_functools', '_operator'}))\n",
      // Its end waits for a thread that is not a daemon, as a fresh Python's (the zygote's end
      // looks for threading only where the run imported it).
      "import threading, time\n"
      "def later():\n    time.sleep(0.3)\n    print('thread done', flush=True)\n"
      "threading.Thread(target=later).start()\nprint('main done', flush=True)\n",
      "import _thread, sys\nprint('threading' in sys.modules)\n",
      "f = open('unclosed.txt', 'w')\nf.write('kept')\nimport atexit\n"
      "_ = atexit.register(lambda: print('atexit ran'))\n",
  };
  // warm_pool_test.cc's cases with files and stdin.
  const std::vector<std::pair<std::string, std::string>> with_input = {
      {"import helper\nfrom helper import X\nprint(helper.X + X)\n",
       ", \"files\": [{\"path\": \"helper.py\", \"content_base64\": \"WCA9IDQy\"}]"},
      {"name = input()\nprint('hi', name)\nimport sys\nprint(repr(sys.stdin.read()))\n",
       ", \"stdin\": \"alice\\nrest of it\\n\""},
  };
  for (const auto& [code, extra] : with_input) {
    auto [zygote, cold] = ZygoteAndCold(code, true, extra);
    BOOST_TEST(Str(zygote, "stdout") == "zygote\n" + After(Str(cold, "stdout")), code);
    BOOST_TEST(Str(zygote, "stderr") == Str(cold, "stderr"), code);
  }
  for (const auto& code : programs) {
    auto [zygote, cold] = ZygoteAndCold(code, code != "print('a'\n");
    BOOST_TEST_CONTEXT(code) {
      BOOST_TEST(Str(zygote, "status") == Str(cold, "status"));
      BOOST_TEST(After(Str(zygote, "stdout")) == After(Str(cold, "stdout")));
      BOOST_TEST(Str(zygote, "stderr") == Str(cold, "stderr"));
      BOOST_TEST(Int(zygote, "exit_code") == Int(cold, "exit_code"));
      BOOST_TEST(zygote["files"].Size() == cold["files"].Size());
    }
  }
}

// Two runs from the zygote share no random state and no fd; each starts with 0-2 only. They
// do share the str hash seed (a documented difference, DESIGN.md: a new seed needs a new
// interpreter): hash("a") is the same in both, and not a cold run's.
BOOST_AUTO_TEST_CASE(two_zygote_runs_share_no_random_state_or_fd) {
  const std::string code =
      "import os, random, uuid, tempfile\n"
      "print(random.random(), os.urandom(8).hex(), uuid.uuid4(), "
      "next(tempfile._get_candidate_names()))\n"
      "print(sorted(os.listdir('/proc/self/fd')))\n"
      "print(hash('a'), hash(b'a'), hash(('a', 1)))\n";
  rapidjson::Document a = PostRun(Body(std::string(kWhichWay) + code, ""));
  rapidjson::Document b = PostRun(Body(std::string(kWhichWay) + code, ""));
  rapidjson::Document cold = PostRun(Body(std::string(kWhichWay) + code, "zygote-hash-cold"));
  const std::string sa = Str(a, "stdout"), sb = Str(b, "stdout"), sc = Str(cold, "stdout");
  BOOST_TEST(sa.rfind("zygote\n", 0) == 0, sa);
  BOOST_TEST(sb.rfind("zygote\n", 0) == 0, sb);
  BOOST_TEST(sc.rfind("cold\n", 0) == 0, sc);
  BOOST_TEST(Line(sa, 1) != Line(sb, 1));
  for (const std::string* s : {&sa, &sb}) {
    BOOST_TEST(Line(*s, 2) == "['0', '1', '2', '3']", *s);  // 3: listdir's own
  }
  BOOST_TEST(!Line(sa, 3).empty(), sa);
  BOOST_TEST(Line(sa, 3) == Line(sb, 3), "the zygote's runs share its str hash seed");
  BOOST_TEST(Line(sa, 3) != Line(sc, 3), "a cold run has a seed of its own");
}

// The run zygote's processes, host root: pid -> parent pid.
std::vector<std::pair<pid_t, pid_t>> RunZygoteProcesses() {
  std::vector<std::pair<pid_t, pid_t>> found;
  const std::string zygote = Stack::Get().state_dir() + "/runs/.zygote/sandrun_zygote.py";
  for (const auto& [pid, argv] : ProcessArgvs()) {
    if (argv.size() < 2 || argv[1] != zygote) continue;
    if (std::find(argv.begin(), argv.end(), "--kernel") != argv.end()) continue;
    const std::string status = ReadFile("/proc/" + std::to_string(pid) + "/status");
    if (status.find("\nUid:\t0\t") == std::string::npos) continue;  // a run's program
    const size_t at = status.find("\nPPid:\t");
    if (at != std::string::npos) found.emplace_back(pid, std::stoi(status.substr(at + 7)));
  }
  return found;
}

// The run zygote serves from as many processes as there are CPUs (2 to 4, main.cc): itself
// and forks of it, each dying with it. Runs side by side all come from them; a server that is
// gone costs its runs a cold start, not an error.
// /healthz says what the zygotes did: an operator sees a zygote that is off, or whose
// requests fail (those runs start cold), without reading stderr.
BOOST_AUTO_TEST_CASE(healthz_counts_what_each_zygote_served) {
  const int64_t before = HealthzCount("zygote", "served");
  rapidjson::Document ran = PostRun(Body(std::string(kWhichWay) + "print(1)", ""));
  BOOST_TEST(Str(ran, "stdout") == "zygote\n1\n", Str(ran, "stderr"));
  BOOST_TEST(HealthzCount("zygote", "served") == before + 1);
  BOOST_TEST(HealthzCount("zygote", "failed") == 0);
  const int64_t servers = HealthzCount("zygote", "servers");
  BOOST_TEST((servers >= 2 && servers <= 4), servers);
  BOOST_TEST(HealthzCount("kernel_zygote", "servers") == 1);
}

BOOST_AUTO_TEST_CASE(the_run_zygote_serves_runs_side_by_side) {
  const size_t servers =
      static_cast<size_t>(std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 2, 4));
  auto processes = RunZygoteProcesses();
  BOOST_TEST_REQUIRE(processes.size() == servers);
  pid_t first = -1;  // the one the daemon started: the others' parent
  for (const auto& [pid, parent] : processes) {
    if (parent == Stack::Get().DaemonPid()) first = pid;
  }
  BOOST_TEST_REQUIRE(first > 0);
  for (const auto& [pid, parent] : processes) BOOST_TEST((pid == first || parent == first));
  auto run_all = [](int count) {
    std::vector<std::thread> threads;
    std::vector<std::string> outputs(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
      threads.emplace_back([&outputs, i] {
        rapidjson::Document d = PostRun(Body(std::string(kWhichWay) + "print(6 * 7)\n", ""));
        outputs[static_cast<size_t>(i)] = Str(d, "status") + " " + Str(d, "stdout");
      });
    }
    for (auto& t : threads) t.join();
    return outputs;
  };
  for (const auto& out : run_all(8)) BOOST_TEST(out == "ok zygote\n42\n");
  // One of the forks killed: every run is still served (by the others, or cold).
  pid_t victim = -1;
  for (const auto& [pid, parent] : processes) {
    if (pid != first) victim = pid;
  }
  BOOST_TEST_REQUIRE(::kill(victim, SIGKILL) == 0);
  for (const auto& out : run_all(6)) {
    BOOST_TEST((out == "ok zygote\n42\n" || out == "ok cold\n42\n"), out);
  }
  BOOST_TEST(RunZygoteProcesses().size() == servers - 1);
  Stack::Get().Restart();
}

// Each run's fork copies the zygote's resident memory into its page tables and its exit
// unmaps it: a server holds no more than a started Python (~5 MiB of anonymous memory here).
// Its 8 MiB receive buffer stays untouched but for what a request writes (until 2026-12-07
// it was written through at its construction: 13 MiB per server).
BOOST_AUTO_TEST_CASE(the_run_zygote_holds_no_resident_buffer) {
  for (int i = 0; i < 4; ++i) {
    rapidjson::Document d = PostRun(Body(std::string(kWhichWay) + "print(1)\n", ""));
    BOOST_TEST(Str(d, "stdout") == "zygote\n1\n");
  }
  auto processes = RunZygoteProcesses();
  BOOST_TEST_REQUIRE(!processes.empty());
  for (const auto& [pid, parent] : processes) {
    const std::string rollup = ReadFile("/proc/" + std::to_string(pid) + "/smaps_rollup");
    const size_t at = rollup.find("\nAnonymous:");
    BOOST_TEST_REQUIRE(at != std::string::npos);
    const long kib = std::stol(rollup.substr(at + 11));
    BOOST_TEST(kib < 8 * 1024, "run zygote " << pid << ": " << kib << " KiB anonymous");
  }
}

// The daemon turns on the cgroup2 hierarchy's favordynmods, keeping its other options: a
// run's cgroup placement then does not wait for an RCU grace period (sandbox/cgroup.h).
BOOST_AUTO_TEST_CASE(the_daemon_turns_on_favordynmods) {
  const std::string mount = Cgroup2Mount();
  const std::string before = Cgroup2Options(mount);
  BOOST_TEST_REQUIRE(!before.empty(), "a cgroup2 mount at " + mount);
  BOOST_TEST_REQUIRE(Cgroup2WithoutFavor(mount, before));
  const std::string off = Cgroup2Options(mount);
  BOOST_TEST_REQUIRE(("," + off + ",").find(",favordynmods,") == std::string::npos, off);
  Stack::Get().Restart();
  const std::string on = Cgroup2Options(mount);
  BOOST_TEST(on == off + ",favordynmods", on);
  rapidjson::Document d = PostRun(Body("print(6 * 7)\n", ""));
  BOOST_TEST(Str(d, "stdout") == "42\n");
}

// A run's emptied directory is kept for a next run (src/run/run_dir.cc SpareDirs: an ext4
// mkdir costs more than a rename): renamed spare-*, holding only its empty "fs", the run's
// tmpfs unmounted; the next run takes it. Nothing of a run is in one.
BOOST_AUTO_TEST_CASE(emptied_run_directories_are_kept_empty) {
  const std::string runs = Stack::Get().state_dir() + "/runs";
  for (int i = 0; i < 3; ++i) {
    rapidjson::Document d = PostRun(
        Body("open('kept.txt', 'w').write('secret')\nimport os\nos.mkdir('sub')\nprint(1)\n", ""));
    BOOST_TEST(Str(d, "stdout") == "1\n");
  }
  // A run's teardown ends after its answer (and the next run takes the spare the last left):
  // wait for the last run's to appear.
  auto spare_names = [&runs] {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(runs)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("spare-", 0) == 0) names.push_back(name);
    }
    return names;
  };
  const auto t0 = std::chrono::steady_clock::now();
  while (spare_names().empty() &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::vector<std::string> spares = spare_names();
  for (const std::string& name : spares) {
    std::vector<std::string> inside;
    std::error_code gone;  // only gone (taken by a next run meanwhile) is not a failure
    for (std::filesystem::recursive_directory_iterator it(runs + "/" + name, gone), end;
         !gone && it != end; it.increment(gone)) {
      inside.push_back(it->path().string().substr(runs.size() + 1 + name.size()));
    }
    if (gone) {
      BOOST_TEST((gone == std::errc::no_such_file_or_directory), name << ": " << gone.message());
    } else {
      BOOST_TEST((inside == std::vector<std::string>{"/fs"}), name);
    }
  }
  BOOST_TEST(spares.size() >= 1u);
  BOOST_TEST(spares.size() <= 16u);
}

// A kill -9 of the daemon leaves no zygote and no sandbox: the zygote dies with it
// (PR_SET_PDEATHSIG, and its socket's EOF), a run's init with its lifeline and the zygote.
// With a kernel frozen between cells too: on cgroup v1 a frozen process takes no SIGKILL, so
// it lived on until the next daemon's start (sandbox/thaw_watch.h).
BOOST_AUTO_TEST_CASE(a_killed_daemon_leaves_no_zygote_and_no_sandbox) {
  rapidjson::Document kept = PostRun(
      R"({"language": "python", "stateful": true, "session": "killed-daemon", "code": "x = 1"})");
  BOOST_TEST_REQUIRE(Str(kept, "status") == "ok", Str(kept, "stderr"));
  std::thread run([] {
    try {
      (void)Post("/run", Body("import time\nprint('started', flush=True)\ntime.sleep(30)\n", ""));
    } catch (...) {
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto all_there = [] {
    const ZygoteStackProcesses n = CountStackProcesses();
    return n.run_zygotes >= 1 && n.kernel_zygotes == 1 && n.zygote_programs >= 1;
  };
  while (!all_there() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  BOOST_TEST_REQUIRE(all_there(), "both zygotes and a run's program from the zygote are there");
  const pid_t daemon = Stack::Get().DaemonPid();
  BOOST_TEST_REQUIRE(daemon > 0);
  kill(daemon, SIGKILL);
  const auto t1 = std::chrono::steady_clock::now();
  while ((ProcessAlive(daemon) || CountStackProcesses().total() > 0) &&
         std::chrono::steady_clock::now() - t1 < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  BOOST_TEST(!ProcessAlive(daemon));
  const ZygoteStackProcesses left = CountStackProcesses();
  BOOST_TEST(left.run_zygotes == 0, "the run zygote outlived the daemon");
  BOOST_TEST(left.kernel_zygotes == 0, "the kernel zygote outlived the daemon");
  BOOST_TEST(left.sandbox == 0, "a sandbox outlived the daemon");
  run.join();
  Stack::Get().Restart();
}

BOOST_AUTO_TEST_SUITE_END()

// ZygotePreload: the zygote's stack also has {"zygote_preload": ["numpy", "pandas",
// "matplotlib.pyplot"]}: those are imported before it serves, so a run finds them in
// sys.modules at its start; what they hold of their import that must be the run's own is
// (numpy's global random state, matplotlib's config directory), and a plot still works.
BOOST_AUTO_TEST_SUITE(ZygotePreload)

BOOST_AUTO_TEST_CASE(preloaded_modules_are_there_at_the_start_and_the_run_is_correct) {
  const std::string code =
      "import sys\n"
      "print([m in sys.modules for m in ('numpy', 'pandas', 'matplotlib.pyplot')])\n"
      "import os, numpy as np, matplotlib, matplotlib.pyplot as plt, pandas as pd\n"
      "print(np.random.random(), sorted(os.listdir('/proc/self/fd')), "
      "len(os.listdir('/proc/self/task')))\n"
      "print(matplotlib.get_configdir(), matplotlib.get_cachedir())\n"
      "pd.DataFrame({'x': [1, 2, 3]}).plot()\n"
      "plt.figure(figsize=(2, 2)); plt.plot([1, 2]); plt.show()\n";
  rapidjson::Document a = PostRun(Body(std::string(kWhichWay) + code, ""));
  rapidjson::Document b = PostRun(Body(std::string(kWhichWay) + code, ""));
  const std::string sa = Str(a, "stdout"), sb = Str(b, "stdout");
  BOOST_TEST(Str(a, "status") == "ok", Str(a, "stderr"));
  BOOST_TEST(sa.rfind("zygote\n", 0) == 0, sa);
  BOOST_TEST(Line(sa, 1) == "[True, True, True]", sa);
  // numpy's global RandomState is reseeded in each run; 0-2 open (3: listdir's), one thread.
  BOOST_TEST(Line(sa, 2) != Line(sb, 2));
  BOOST_TEST(Line(sa, 2).find(" ['0', '1', '2', '3'] 1") != std::string::npos, sa);
  BOOST_TEST(Line(sa, 3) == "/tmp/matplotlib /tmp/matplotlib", sa);
  // The shown figure, then the one left open (shown at the end, as in a cold run).
  BOOST_TEST(Str(a, "stderr") == "");
  BOOST_REQUIRE(a["displays"].IsArray());
  BOOST_TEST(a["displays"].Size() == 2u);
  BOOST_TEST(a["files"].Size() == 2u);
}

BOOST_AUTO_TEST_SUITE_END()

// ZygotePreloadRefused: the stack's zygote_preload names a module that does not import, so
// the zygote refuses to serve (sandrun_zygote.py _preload) and exits.
BOOST_AUTO_TEST_SUITE(ZygotePreloadRefused)

// The daemon sees the refusal at once (the zygote's end of the socket is the zygote's alone:
// its exit is an EOF), says why, and serves: Python runs start cold. Before, the daemon held
// the other end too and waited the whole ready timeout (120 s) before it served.
BOOST_AUTO_TEST_CASE(a_refused_module_leaves_the_daemon_serving_cold_runs) {
  const std::string stat = ReadFile("/proc/" + std::to_string(Stack::Get().DaemonPid()) + "/stat");
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string field;
  for (int i = 3; i < 22; ++i) fields >> field;  // field 22: starttime, in clock ticks
  double started_s = 0, uptime_s = 0;
  fields >> started_s;
  std::istringstream(ReadFile("/proc/uptime")) >> uptime_s;
  const double daemon_age_s = uptime_s - started_s / static_cast<double>(::sysconf(_SC_CLK_TCK));
  BOOST_TEST(daemon_age_s < 60.0, "the daemon served only after " << daemon_age_s << " s");
  rapidjson::Document r = PostRun(Body(std::string(kWhichWay) + "print(1)\n", ""));
  BOOST_TEST(Str(r, "stdout") == "cold\n1\n", Str(r, "stderr"));
  const std::string log = ReadFile(Stack::Get().state_dir() + "/logs/sandrund.log");
  BOOST_TEST(
      log.find("zygote_preload 'sandrun_no_such_module': its import failed") != std::string::npos,
      log);
  BOOST_TEST(log.find("Python runs start without it") != std::string::npos, log);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
