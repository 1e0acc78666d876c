// sandrund: flags -> config -> sandbox launcher -> service -> FastCGI server.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "api/housekeeping.h"
#include "api/service.h"
#include "api/stop_signals.h"
#include "config/config.h"
#include "config/config_path.h"
#include "config/runs_dir.h"
#include "jupyter/server.h"
#include "kernel/kernel.h"
#include "python/support_files.h"
#include "run/run_displays.h"
#include "run/run_steps.h"
#include "sandbox/cgroup.h"
#include "sandbox/host.h"
#include "sandbox/launcher.h"
#include "sandbox/root_template.h"
#include "sandbox/thaw_watch.h"
#include "server/fcgi_server.h"
#include "storage/janitor.h"
#include "storage/runs_dir.h"
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
               "                                       (FILE: %s by default, or\n"
               "                                       scripts/serve's .state/sandrun.jsonc\n"
               "                                       when that is missing)\n"
               "       sandrund print-config [--config FILE]\n"
               "                                       the effective config as JSON (defaults,\n"
               "                                       FILE and SANDRUN_* merged; no secrets)\n"
               "       sandrund --version              version and commit\n\n%s",
               config::kDefaultConfigPath, config::HelpText().c_str());
}

// The root template's directory in the runs directory (hidden: the runs' sweep passes it by).
constexpr char kRootTemplateDir[] = ".root-template";
// The zygotes' directory in the runs dir: their support files, their HOME (StartZygote).
constexpr char kZygoteDir[] = ".zygote";

// What PrepareHost needs of the config, with the root template in `template_dir`.
sandbox::HostOptions HostOptionsOf(const config::Config& config, const std::string& template_dir,
                                   bool verbose, bool check_nginx) {
  sandbox::HostOptions options;
  options.sandbox_uid = static_cast<uid_t>(config.sandbox_uid);
  options.sandbox_gid = static_cast<gid_t>(config.sandbox_gid);
  options.cgroup_name = config.cgroup_name;
  options.require_cgroups = config.require_cgroups;
  options.template_dir = template_dir;
  options.verbose = verbose;
  options.check_nginx = check_nginx;
  return options;
}

// The root templates of earlier `sandrund check`s that did not end by themselves (a kill, a
// Ctrl-C): `<runs_dir>/.root-template-check-<pid>` of a pid no longer running. The daemon's
// start leaves dot-names alone, so nothing else removes them.
void RemoveDeadChecksTemplates(const std::string& runs_dir) {
  const std::string prefix = std::string(kRootTemplateDir) + "-check-";
  std::error_code error;
  for (auto it = std::filesystem::directory_iterator(runs_dir, error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    const std::filesystem::directory_entry& entry = *it;
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string pid = name.substr(prefix.size());
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code gone;
    if (!std::filesystem::exists("/proc/" + pid, gone)) {
      (void)sandbox::RootTemplate::Remove(entry.path().string());
    }
  }
}

int Check(const config::Config& config) {
  // Beside a live daemon: a template of its own, not the daemon's.
  RemoveDeadChecksTemplates(config.runs_dir);
  const std::string template_dir =
      config.runs_dir + "/" + kRootTemplateDir + "-check-" + std::to_string(::getpid());
  sandbox::Host host = sandbox::PrepareHost(HostOptionsOf(config, template_dir, /*verbose=*/false,
                                                          /*check_nginx=*/true));
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

// The command line. Each flag is in Usage().
struct Flags {
  std::string config_path;  // "" = defaults and environment only
  std::string config_note;  // why this config, when no --config named it
  bool config_given = false;
  bool check = false;
  bool print_config = false;
};

// `check` and `print-config` without --config: the installed config, or scripts/serve's
// (config/config_path.h). Returns -1 to go on, or 2 when there is none (saying what to run).
int ChooseConfig(Flags* flags) {
  const char* command = flags->check ? "check" : "print-config";
  std::error_code error;
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe", error).string();
  auto exists = [](const std::string& path) {
    std::error_code ignored;
    return std::filesystem::exists(path, ignored);
  };
  const config::ConfigPathChoice choice =
      config::ChooseConfigPath(exists, config::ServeConfigCandidates(exe), command);
  if (choice.path.empty()) {
    std::fprintf(flags->check ? stdout : stderr, "sandrund %s: %s\n", command, choice.help.c_str());
    return 2;
  }
  flags->config_path = choice.path;
  flags->config_note = choice.note;
  return -1;
}

// Parses argv into `flags`. Returns -1 to go on, or the exit code (--help, --version, an
// unknown argument).
int ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      Usage();
      return 0;
    } else if (arg == "--version") {
      std::printf("sandrund %s (commit %s)\n", kVersion, kGitDescribe);
      return 0;
    } else if (arg == "--config" && i + 1 < argc) {
      flags->config_path = argv[++i];
    } else if (arg == "check") {
      flags->check = true;
    } else if (arg == "print-config") {
      flags->print_config = true;
    } else {
      std::fprintf(stderr, "sandrund: unknown argument '%s' (see --help)\n", arg.c_str());
      return 2;
    }
  }
  flags->config_given = !flags->config_path.empty();
  if ((flags->check || flags->print_config) && !flags->config_given) return ChooseConfig(flags);
  return -1;
}

// config::Load, or its problems on stderr (one line each, each with its fix: Load's
// contract) and nullopt.
std::optional<config::Config> LoadConfig(const Flags& flags) {
  auto loaded = config::Load(flags.config_path, /*read_secrets=*/!flags.print_config);
  if (loaded.ok()) return std::move(*loaded);
  std::istringstream problems(loaded.error().message);
  for (std::string line; std::getline(problems, line);) {
    std::fprintf(stderr, "sandrund: config %s: %s\n",
                 flags.config_path.empty() ? "(none)" : flags.config_path.c_str(), line.c_str());
  }
  return std::nullopt;
}

// `sandrund print-config`: the config as the daemon would run with it, runs_dir included
// (config/runs_dir.h: where runs really go when the configured one cannot be reached). 2, with
// the reason, when the daemon would refuse it.
int PrintConfig(config::Config& config) {
  auto runs_dir = config::ChooseRunsDir(config);
  if (!runs_dir.ok()) {
    std::fprintf(stderr, "sandrund: config: %s\n", runs_dir.error().message.c_str());
    return 2;
  }
  if (runs_dir->fallback) {
    std::fprintf(stderr, "sandrund print-config: runs_dir: %s\n", runs_dir->note.c_str());
  }
  config.runs_dir = runs_dir->path;
  std::fputs(config::EffectiveConfigJson(config).c_str(), stdout);
  return 0;
}

// The runs directory (config/runs_dir.h) and the directories the daemon writes to. Returns
// -1 to go on, or the exit code.
int PrepareDirs(config::Config& config, bool* runs_dir_fallback) {
  auto runs_dir = config::ChooseRunsDir(config);
  if (!runs_dir.ok()) {
    std::fprintf(stderr, "sandrund: config: %s\n", runs_dir.error().message.c_str());
    return 2;
  }
  if (runs_dir->fallback) std::fprintf(stderr, "sandrund: %s\n", runs_dir->note.c_str());
  config.runs_dir = runs_dir->path;
  *runs_dir_fallback = runs_dir->fallback;
  // Writes to a closed pipe (a client gone, a sandbox's stdin) must be errors, not deaths.
  ::signal(SIGPIPE, SIG_IGN);
  for (const auto& dir : {config.state_dir, config.runs_dir, config.artifacts_dir}) {
    if (Status s = sys::MakeDirs(dir, 0755); !s.ok()) {
      std::fprintf(stderr, "sandrund: %s\n", s.error().message.c_str());
      return 1;
    }
  }
  return -1;
}

// The self-test and the prepared caches, when the host can run sandboxes.
void SelfTest(api::Service& service) {
  std::string error = service.SelfTest();
  if (!error.empty()) std::fprintf(stderr, "sandrund: %s\n", error.c_str());
  if (!error.empty()) return;
  for (const std::string& missing : service.PrepareCaches()) {
    std::fprintf(stderr, "sandrund: %s\n", missing.c_str());
  }
}

// What a stop leaves of the runs directory: nothing (a crash's leftovers go at the next start).
// The root template too (RootTemplate::Remove; its owner's destructor then finds it gone).
void CleanRunsDir(const std::string& runs_dir, bool fallback) {
  storage::SweepRunsDir(runs_dir);
  (void)sandbox::RootTemplate::Remove(runs_dir + "/" + kRootTemplateDir);
  // The zygotes' support files (StartZygote): imported long ago, written again at a start.
  (void)sys::RemoveTree(runs_dir + "/" + kZygoteDir);
  if (!fallback) return;
  if (Status s = storage::RemoveFallbackRunsDir(runs_dir); !s.ok()) {
    std::fprintf(stderr, "sandrund: %s\n", s.error().message.c_str());
  }
}

// How many sandboxes can exist at once: a sandbox slot each (runs, a stateful run's cell),
// the warm pool's waiting ones, the live kernels (frozen or not).
int64_t MaxSandboxes(const config::Config& config) {
  int64_t pooled = 0;
  for (const auto& [language, size] : config.pool) pooled += std::max<int64_t>(0, size);
  return config.max_concurrent_runs + pooled + config.max_kernels;
}

// Starts the zygote of `kind` for `launcher`: the support files and sandrun_zygote.py in
// <runs_dir>/.zygote, the Python of the language "python", a run's environment with that
// directory on PYTHONPATH, _sandrun_zygote.so beside this executable. The run zygote (config
// `zygote`) imports zygote_preload and has a program run's display settings; the kernel
// zygote (config `kernel_zygote`) imports ipykernel and has a kernel's environment. A failure
// is said and those sandboxes start as without it.
void StartZygote(const config::Config& config, sandbox::Launcher& launcher,
                 sandbox::ZygoteKind kind) {
  const bool kernel = kind == sandbox::ZygoteKind::kKernel;
  sandbox::ZygoteOptions options;
  for (const auto& language : config.languages) {
    if (language.name == "python" && !language.argv.empty()) options.python = language.argv[0];
  }
  if (kernel) options.python = kernel::KernelSpec().python;  // the Python every kernel runs
  options.script_dir = config.runs_dir + "/" + kZygoteDir;
  std::error_code error;
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe", error).string();
  options.module_dir = exe.substr(0, exe.rfind('/'));
  options.kernel = kernel;
  if (!kernel) options.preload = config.zygote_preload;
  // Runs come many at a time, kernels seldom: the run zygote serves as many at once as there
  // are CPUs (2 to 4), each request's wait for the daemon's half of the set-up overlapped.
  if (!kernel)
    options.servers = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 2, 4);
  Status s = options.python.empty() ? MakeError(ErrorKind::kSystem, "no language \"python\"")
                                    : sys::MakeDirs(options.script_dir, 0755);
  for (const auto& file : python::SupportFiles()) {
    if (s.ok()) {
      s = sys::WriteFile(options.script_dir + "/" + file.name, std::string(file.content), 0644);
    }
  }
  // The zygote is host root on the host's files: its Python searches only root's directories
  // (not the run's /home/user, nor a user site or cache below HOME); sandrun_zygote.py gives
  // each run its own PYTHONPATH, HOME and XDG_CACHE_HOME back.
  for (std::string& line : run::SandboxEnv(config)) {
    if (line.rfind("PYTHONPATH=", 0) == 0) line = "PYTHONPATH=" + options.script_dir;
    if (line.rfind("HOME=", 0) == 0) line = "HOME=" + options.script_dir;
    if (line.rfind("XDG_CACHE_HOME=", 0) == 0) line = "XDG_CACHE_HOME=" + options.script_dir;
    options.env.push_back(std::move(line));
  }
  // What a run's notebook display reads (sitecustomize installs its hooks only with them); a
  // kernel has none of them.
  if (!kernel) {
    for (std::string& line : run::NotebookEnv(config)) options.env.push_back(std::move(line));
  }
  const char* what = kernel ? "kernel zygote" : "zygote";
  auto zygote = s.ok() ? sandbox::Zygote::Start(options)
                       : Result<std::unique_ptr<sandbox::Zygote>>(s.error());
  if (!zygote.ok()) {
    std::fprintf(stderr, "sandrund: %s: %s; %s start without it\n", what,
                 zygote.error().message.c_str(), kernel ? "kernels" : "Python runs");
    return;
  }
  std::fprintf(stderr, "sandrund: %s started (pid %d)\n", what, static_cast<int>((*zygote)->pid()));
  launcher.set_zygote(kind, std::move(*zygote));
}

// A run's cgroup placement without an RCU grace period's wait (sandbox/cgroup.h).
void FavorCgroupPlacement() {
  auto favored = sandbox::FavorDynamicModifications();
  if (!favored.ok()) {
    std::fprintf(stderr,
                 "sandrund: cgroup favordynmods: %s; a run's cgroup placement may wait ~10 ms\n",
                 favored.error().message.c_str());
  } else if (*favored) {
    std::fprintf(stderr, "sandrund: cgroup2 favordynmods turned on\n");
  }
}

// The thaw watch (sandbox/thaw_watch.h): on cgroup v1, kernels this daemon leaves frozen
// when it is killed are thawed, so that they end; without it they live on until the next
// start sweeps them (said on stderr).
void StartThawWatch(const sandbox::Launcher& launcher) {
  const std::string dir = launcher.cgroups() ? launcher.cgroups()->freezer_dir() : "";
  auto init = sandbox::InitExecutablePath();
  auto watch = init.ok() ? sandbox::StartThawWatch(*init, dir) : Result<pid_t>(init.error());
  if (!watch.ok()) {
    std::fprintf(stderr,
                 "sandrund: thaw watch: %s; kernels frozen when the daemon is killed live on "
                 "until its next start\n",
                 watch.error().message.c_str());
  } else if (*watch > 0) {
    std::fprintf(stderr, "sandrund: thaw watch started (pid %d)\n", static_cast<int>(*watch));
  }
}

// The daemon: the host, the service, the janitor, the signal thread and the FastCGI server,
// until a stop signal. `started`: the config as loaded (what a SIGHUP reload compares with).
int RunDaemon(const Flags& flags, const config::Config& started, const config::Config& config,
              bool runs_dir_fallback) {
  // First: every thread inherits the mask, one thread waits for the signals. A thread started
  // before it (the launcher's pool of network namespaces starts its own at the self-test) had
  // SIGTERM unblocked and took it, with libfcgi's handler: the stop was never seen.
  const sigset_t stop = api::BlockStopSignals();
  auto cgroup_lock = sandbox::LockCgroupName(config.cgroup_name);
  if (!cgroup_lock.ok()) {
    std::fprintf(stderr, "sandrund: %s\n", cgroup_lock.error().message.c_str());
    return 1;
  }
  int swept = storage::SweepRunsDir(config.runs_dir);

  sandbox::Host host = sandbox::PrepareHost(HostOptionsOf(
      config, config.runs_dir + "/" + kRootTemplateDir, /*verbose=*/true, /*check_nginx=*/false));
  if (!host.problems.empty()) {
    std::fprintf(stderr, "sandrund: this host cannot run sandboxes:\n%s", host.problems.c_str());
  }
  if (host.cgroups_unavailable && config.require_cgroups) return 1;
  if (host.launcher && host.weaker_limits.empty()) FavorCgroupPlacement();
  if (host.launcher) StartThawWatch(*host.launcher);
  if (host.launcher)
    host.launcher->set_user_sysctls(sandbox::ApplyUserLimitShares(MaxSandboxes(config)));
  if (host.launcher && config.zygote)
    StartZygote(config, *host.launcher, sandbox::ZygoteKind::kRun);
  if (host.launcher && config.kernel_zygote) {
    StartZygote(config, *host.launcher, sandbox::ZygoteKind::kKernel);
  }
  api::Service service(config, host.launcher.get(), host.problems);
  service.SetWeakerLimits(host.weaker_limits);
  if (host.launcher) SelfTest(service);
  // environments_prebuild: built in the background while the daemon serves.
  service.PrebuildEnvironments();
  // The warm pool fills in the background (its thread inherits the signal mask).
  service.StartWarmPool();
  std::unique_ptr<storage::Janitor> janitor = api::StartJanitor(config, service);

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
  // Jupyter's server API beside it (nginx proxies /api/ and /login there).
  jupyter::JupyterServer jupyter_server(&service, config.fcgi_socket + ".jupyter");
  if (Status s = jupyter_server.Open(); !s.ok()) {
    std::fprintf(stderr, "sandrund: %s\n", s.error().message.c_str());
    return 1;
  }
  jupyter_server.Start();
  api::StopSignals signals(stop, flags.config_path, started, service,
                           {[&server] { server.Stop(); },
                            [runs_dir = config.runs_dir, runs_dir_fallback] {
                              CleanRunsDir(runs_dir, runs_dir_fallback);
                            }});
  signals.Start();
  server.Serve([&](const api::HttpRequest& r) { return service.Handle(r); });
  signals.Join();
  jupyter_server.Stop();
  service.StopWarmPool();
  service.EndKernels();
  CleanRunsDir(config.runs_dir, runs_dir_fallback);
  std::fprintf(stderr, "sandrund: stopped\n");
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
  Flags flags;
  if (int done = ParseFlags(argc, argv, &flags); done >= 0) return done;
  if (flags.check) {
    std::printf("sandrund check: config %s%s\n", flags.config_path.c_str(),
                flags.config_given ? "" : (" (" + flags.config_note + ")").c_str());
    std::fflush(stdout);  // before any problem on stderr
  } else if (flags.print_config && !flags.config_given) {
    std::fprintf(stderr, "sandrund print-config: config %s (%s)\n", flags.config_path.c_str(),
                 flags.config_note.c_str());
  }
  std::optional<config::Config> loaded = LoadConfig(flags);
  if (!loaded) return 2;
  config::Config& config = *loaded;
  if (flags.print_config) return PrintConfig(config);
  const config::Config started = config;  // as loaded: what a SIGHUP reload compares with
  bool runs_dir_fallback = false;
  if (int done = PrepareDirs(config, &runs_dir_fallback); done >= 0) return done;
  if (flags.check) {
    // Beside a live daemon: its own cgroup directory, and no sweep of the runs directory
    // (both belong to the daemon; sweeping them would break its runs in flight).
    config.cgroup_name += "-check-" + std::to_string(::getpid());
    return Check(config);
  }
  return RunDaemon(flags, started, config, runs_dir_fallback);
}
