// sandrund: flags -> config -> sandbox launcher -> service -> FastCGI server.
#include <dirent.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "api/config_reload.h"
#include "api/service.h"
#include "config/config.h"
#include "sandbox/cgroup.h"
#include "sandbox/host_check.h"
#include "sandbox/launcher.h"
#include "sandbox/seccomp.h"
#include "server/fcgi_server.h"
#include "storage/janitor.h"
#include "storage/session_restore.h"
#include "sys/syscalls.h"
#include "util/memory.h"
#include "version.h"

namespace {

using namespace sandrun;

void Usage() {
  std::fprintf(stdout,
               "usage: sandrund [--config FILE]        run the daemon (foreground)\n"
               "       sandrund check [--config FILE]  check that this host can sandbox\n"
               "                                       (FILE: %s by default)\n"
               "       sandrund print-config [--config FILE]\n"
               "                                       the effective config as JSON (defaults,\n"
               "                                       FILE and SANDRUN_* merged; no secrets)\n"
               "       sandrund --version              version and commit\n\n%s",
               config::kDefaultConfigPath, config::HelpText().c_str());
}

// Removes what a crashed daemon left in the runs directory: workspace mounts and dirs.
int SweepRuns(const std::string& runs_dir) {
  int swept = 0;
  DIR* dir = ::opendir(runs_dir.c_str());
  if (dir == nullptr) return 0;
  while (struct dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::string run = runs_dir + "/" + e->d_name;
    (void)sys::Unmount(run + "/fs");
    if (sys::RemoveTree(run).ok()) ++swept;
  }
  ::closedir(dir);
  return swept;
}

// The fallback runs directory (/run/sandrun/<hash>) and /run/sandrun itself, when empty:
// nothing of a cleanly stopped daemon stays in /run. Another daemon's directory keeps
// /run/sandrun (rmdir fails with ENOTEMPTY, which is fine).
void RemoveFallbackRunsDir(const std::string& runs_dir) {
  if (Status s = sys::RemoveEmptyDir(runs_dir); !s.ok()) {
    std::fprintf(stderr, "sandrund: %s\n", s.error().message.c_str());
    return;
  }
  (void)sys::RemoveEmptyDir(runs_dir.substr(0, runs_dir.rfind('/')));
}

struct Host {
  std::unique_ptr<sandbox::Launcher> launcher;
  std::string problems;                    // "" when the host can sandbox
  std::vector<std::string> weaker_limits;  // without cgroups (require_cgroups: false)
  bool cgroups_unavailable = false;        // sandbox::CgroupsUnavailable of the problems
};

// Output of `nginx -V` (it prints to stderr), "" when nginx is not installed.
std::string NginxVersionOutput() {
  FILE* pipe = ::popen("nginx -V 2>&1", "r");
  if (pipe == nullptr) return "";
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  return ::pclose(pipe) == 0 ? out : "";
}

// The host checks of sandbox/host_check.h, then the pieces a launcher needs. `check_nginx`:
// only `sandrund check` looks at nginx (the daemon does not run it).
Host PrepareHost(const config::Config& config, bool verbose, bool check_nginx) {
  Host host;
  sandbox::HostFacts facts = sandbox::ReadHostFacts();
  facts.check_nginx = check_nginx;
  if (check_nginx) facts.nginx_version_output = NginxVersionOutput();
  auto filter = sandbox::SeccompFilter::Compile();
  if (!filter.ok()) host.problems += "seccomp: " + filter.error().message + "\n";
  std::unique_ptr<sandbox::CgroupManager> cgroups;
  auto detected = sandbox::DetectCgroups(config.cgroup_name);
  if (detected.ok()) {
    cgroups = std::move(*detected);
    facts.cgroup_version = cgroups->version();
    int stale = cgroups->SweepStale();
    if (verbose) {
      std::fprintf(stderr, "sandrund: cgroup %s; swept %d stale run cgroups\n",
                   cgroups->version().c_str(), stale);
    }
  } else {
    facts.cgroup_error = detected.error().message;
  }
  const auto checked = sandbox::CheckHost(facts, config.require_cgroups);
  host.cgroups_unavailable = sandbox::CgroupsUnavailable(checked);
  for (const auto& problem : checked) {
    host.problems += problem.what + "\n  fix: " + problem.fix + "\n";
  }
  host.weaker_limits = sandbox::WeakerLimits(facts);
  for (const auto& weaker : host.weaker_limits) {
    std::fprintf(stderr, "sandrund: WARNING: no cgroups (%s); weaker limit: %s\n",
                 facts.cgroup_error.c_str(), weaker.c_str());
  }
  auto init = sandbox::OpenInitExecutable();
  if (!init.ok()) host.problems += "sandrun-init: " + init.error().message + "\n";
  if (filter.ok() && init.ok() && host.problems.empty()) {
    host.launcher = std::make_unique<sandbox::Launcher>(std::move(*filter), std::move(cgroups),
                                                        std::move(*init));
  }
  return host;
}

// One line per janitor sweep that removed something or failed somewhere (and at start-up).
void LogSweep(const storage::SweepStats& stats, bool always) {
  if (!always && stats.runs_removed == 0 && stats.leftovers_removed == 0 &&
      stats.user_dirs_removed == 0 && stats.errors.empty()) {
    return;
  }
  std::fprintf(
      stderr,
      "sandrund: janitor: removed %lld expired runs, %lld leftovers, %lld empty user "
      "dirs; kept %lld runs (%llu files, %llu bytes)%s%s\n",
      static_cast<long long>(stats.runs_removed), static_cast<long long>(stats.leftovers_removed),
      static_cast<long long>(stats.user_dirs_removed), static_cast<long long>(stats.runs_kept),
      static_cast<unsigned long long>(stats.kept.files),
      static_cast<unsigned long long>(stats.kept.bytes),
      stats.errors.empty() ? "" : "; first error: ",
      stats.errors.empty() ? "" : stats.errors.front().c_str());
}

int Check(const config::Config& config) {
  Host host = PrepareHost(config, false, /*check_nginx=*/true);
  if (!host.problems.empty()) {
    std::fputs(host.problems.c_str(), stdout);
    return 1;
  }
  api::Service service(config, host.launcher.get(), "");
  std::string error = service.SelfTest();
  if (!error.empty()) {
    std::printf("%s\n", error.c_str());
    return 1;
  }
  std::printf("ok: this host can run sandboxes (cgroups %s)\n",
              host.launcher->cgroups() ? host.launcher->cgroups()->version().c_str() : "none");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Internal: the session-restore helper the daemon starts in a run's cgroup
  // (storage/session_restore.h); not for operators.
  if (argc >= 2 && std::strcmp(argv[1], "restore-session") == 0) {
    return storage::RestoreSessionMain(std::vector<std::string>(argv + 2, argv + argc));
  }
  // Before any thread: two malloc arenas for all worker threads (util/memory.h).
  util::TuneMalloc(2);
  std::string config_path;
  bool check = false;
  bool print_config = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      Usage();
      return 0;
    } else if (arg == "--version") {
      std::printf("sandrund %s (commit %s)\n", kVersion, kGitDescribe);
      return 0;
    } else if (arg == "--config" && i + 1 < argc) {
      config_path = argv[++i];
    } else if (arg == "check") {
      check = true;
    } else if (arg == "print-config") {
      print_config = true;
    } else {
      std::fprintf(stderr, "sandrund: unknown argument '%s' (see --help)\n", arg.c_str());
      return 2;
    }
  }
  bool config_given = !config_path.empty();
  if ((check || print_config) && !config_given) config_path = config::kDefaultConfigPath;
  if (check) {
    std::printf("sandrund check: config %s%s\n", config_path.c_str(),
                config_given ? "" : " (the default; --config FILE names another)");
    std::fflush(stdout);  // before any problem on stderr
  }
  auto loaded = config::Load(config_path, /*read_secrets=*/!print_config);
  if (!loaded.ok()) {
    // One line per problem, each with its fix (config::Load's contract).
    std::istringstream problems(loaded.error().message);
    for (std::string line; std::getline(problems, line);) {
      std::fprintf(stderr, "sandrund: config %s: %s\n",
                   config_path.empty() ? "(none)" : config_path.c_str(), line.c_str());
    }
    return 2;
  }
  config::Config& config = *loaded;
  if (print_config) {
    std::fputs(config::EffectiveConfigJson(config).c_str(), stdout);
    return 0;
  }
  const config::Config started = config;  // as loaded: what a SIGHUP reload compares with
  // The sandbox's own ids (not root) build its mounts from paths below runs_dir, so every
  // directory above it must be searchable by others. A state dir under /root (0700) is not:
  // then runs go to /run/sandrun/<hash> unless runs_dir was set explicitly.
  bool runs_dir_fallback = false;  // /run/sandrun/<hash>: removed again at a clean stop
  if (std::string why = sys::FirstUnsearchableDir(config.runs_dir); !why.empty()) {
    if (config.runs_dir_configured) {
      std::fprintf(stderr,
                   "sandrund: config: key 'runs_dir': %s: make every directory on the "
                   "path searchable by others (chmod o+x) or choose another path\n",
                   why.c_str());
      return 2;
    }
    const std::string fallback =
        "/run/sandrun/" + std::to_string(std::hash<std::string>{}(config.state_dir));
    std::fprintf(stderr, "sandrund: %s; runs go to %s instead\n", why.c_str(), fallback.c_str());
    config.runs_dir = fallback;
    runs_dir_fallback = true;
  }
  // Writes to a closed pipe (a client gone, a sandbox's stdin) must be errors, not deaths.
  ::signal(SIGPIPE, SIG_IGN);
  for (const auto& dir : {config.state_dir, config.runs_dir, config.artifacts_dir}) {
    if (Status s = sys::MakeDirs(dir, 0755); !s.ok()) {
      std::fprintf(stderr, "sandrund: %s\n", s.error().message.c_str());
      return 1;
    }
  }
  if (check) {
    // Beside a live daemon: its own cgroup directory, and no sweep of the runs directory
    // (both belong to the daemon; sweeping them would break its runs in flight).
    config.cgroup_name += "-check-" + std::to_string(::getpid());
    return Check(config);
  }
  int swept = SweepRuns(config.runs_dir);

  Host host = PrepareHost(config, true, /*check_nginx=*/false);
  if (!host.problems.empty()) {
    std::fprintf(stderr, "sandrund: this host cannot run sandboxes:\n%s", host.problems.c_str());
  }
  if (host.cgroups_unavailable && config.require_cgroups) return 1;
  api::Service service(config, host.launcher.get(), host.problems);
  service.SetWeakerLimits(host.weaker_limits);
  if (host.launcher) {
    std::string error = service.SelfTest();
    if (!error.empty()) std::fprintf(stderr, "sandrund: %s\n", error.c_str());
    const std::string no_cache = error.empty() ? service.PrepareFontCache() : "";
    if (!no_cache.empty()) {
      std::fprintf(stderr, "sandrund: no prepared font cache: %s\n", no_cache.c_str());
    }
  }
  // Block the stop signals and SIGHUP in every thread; one thread waits for them (sigwait).
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  // environments_prebuild: built in the background while the daemon serves (on threads that
  // inherit the signal mask).
  service.PrebuildEnvironments();
  // The warm pool fills in the background (its thread inherits the signal mask).
  service.StartWarmPool();

  // Started after the signal mask, which its thread inherits. Its first sweep runs here,
  // before any request, and also clears what a crash left half-published or half-deleted.
  storage::Janitor janitor(
      {config.artifacts_dir, config.artifact_max_age_s}, config.janitor_interval_s, {},
      [first = true, &service](const storage::SweepStats& stats) mutable {
        LogSweep(stats, first);
        first = false;
        service.SetArtifactUsage(stats.kept.files, stats.kept.bytes);
        // Idle sessions go with the same sweep (DESIGN.md §6).
        if (int removed = service.SweepIdleSessions(); removed > 0) {
          std::fprintf(stderr, "sandrund: janitor: removed %d idle sessions\n", removed);
        }
        // And prepared environments past environments_max_mb, least recently used first.
        if (int removed = service.SweepEnvironments(); removed > 0) {
          std::fprintf(stderr, "sandrund: janitor: removed %d prepared environments\n", removed);
        }
      });
  janitor.Start();

  server::ServerOptions options;
  options.socket_path = config.fcgi_socket;
  options.threads = static_cast<int>(config::WorkerThreads(config));
  options.max_body_bytes = config.max_body_bytes;
  server::FcgiServer server(options);
  if (Status s = server.Open(); !s.ok()) {
    std::fprintf(stderr, "sandrund: %s\n", s.error().message.c_str());
    return 1;
  }
  std::fprintf(stderr,
               "sandrund: listening on %s%s (%lld sandboxes at once, queue %lld; swept %d "
               "stale runs)\n",
               config.fcgi_socket.c_str(),
               server.socket_from_systemd() ? ", the socket of sandrund.socket" : "",
               static_cast<long long>(config.max_concurrent_runs),
               static_cast<long long>(config.max_queue), swept);
  // SIGTERM drains (issue 10 item 1): new runs get 503 "stopping" while the server still
  // answers, runs in flight go on up to their wall limit (the ceiling, plus a margin for
  // export), then the server stops. Past that, exit: the sandboxes left die with us
  // (init's PDEATHSIG and lifeline) and the next start sweeps their cgroups.
  // SIGHUP re-reads the config's live keys (api/config_reload.h) and goes on waiting.
  // After server.Stop() main returns and destroys what the lambda refers to (service, server,
  // config), while this thread sleeps: what it needs after the sleep are copies of its own.
  std::thread waiter([&, runs_dir = config.runs_dir, runs_dir_fallback] {
    int sig = 0;
    while (sigwait(&stop, &sig) == 0 && sig == SIGHUP) {
      api::ReloadConfig(config_path, started, &service);
    }
    const auto drain_limit = std::chrono::seconds(service.LiveConfig()->ceilings.wall_time_s + 10);
    std::fprintf(stderr, "sandrund: signal %d: stopping; %lld runs in flight may finish\n", sig,
                 static_cast<long long>(service.RunsInFlight()));
    service.BeginDrain();
    const auto deadline = std::chrono::steady_clock::now() + drain_limit;
    while (service.RunsInFlight() > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    service.StopWarmPool();
    service.EndKernels();  // no kernel outlives the daemon: processes, cgroups, directories
    server.Stop();
    std::this_thread::sleep_for(std::chrono::seconds(3));
    std::fprintf(stderr,
                 "sandrund: the server did not stop within 3 s of the drain (requests in "
                 "flight, or a worker waiting on sandrund.socket's socket); exiting\n");
    SweepRuns(runs_dir);
    if (runs_dir_fallback) RemoveFallbackRunsDir(runs_dir);
    std::_Exit(0);
  });
  waiter.detach();
  server.Serve([&](const api::HttpRequest& r) { return service.Handle(r); });
  service.StopWarmPool();
  service.EndKernels();
  SweepRuns(config.runs_dir);
  if (runs_dir_fallback) RemoveFallbackRunsDir(config.runs_dir);
  std::fprintf(stderr, "sandrund: stopped\n");
  return 0;
}
