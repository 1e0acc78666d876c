// sandrund: flags -> config -> sandbox launcher -> service -> FastCGI server.
#include <dirent.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "api/service.h"
#include "config/config.h"
#include "sandbox/cgroup.h"
#include "sandbox/launcher.h"
#include "sandbox/seccomp.h"
#include "server/fcgi_server.h"
#include "sys/syscalls.h"

namespace {

using namespace sandrun;

void Usage() {
  std::fprintf(stdout,
               "usage: sandrund [--config FILE]        run the daemon (foreground)\n"
               "       sandrund check [--config FILE]  check that this host can sandbox\n\n%s",
               config::HelpText().c_str());
}

// Removes what a crashed daemon left in the runs directory: workspace mounts and dirs.
int SweepRuns(const std::string& runs_dir) {
  int swept = 0;
  DIR* dir = ::opendir(runs_dir.c_str());
  if (dir == nullptr) return 0;
  while (struct dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::string run = runs_dir + "/" + e->d_name;
    (void)sys::Unmount(run + "/ws");
    if (sys::RemoveTree(run).ok()) ++swept;
  }
  ::closedir(dir);
  return swept;
}

struct Host {
  std::unique_ptr<sandbox::Launcher> launcher;
  std::string problems;  // "" when the host can sandbox
};

Host PrepareHost(const config::Config& config, bool verbose) {
  Host host;
  std::ifstream userns("/proc/sys/user/max_user_namespaces");
  long max_userns = -1;
  if (userns >> max_userns && max_userns == 0) {
    host.problems += "user namespaces are disabled: sysctl -w user.max_user_namespaces=15000\n";
  }
  auto filter = sandbox::SeccompFilter::Compile();
  if (!filter.ok()) host.problems += "seccomp: " + filter.error().message + "\n";
  std::unique_ptr<sandbox::CgroupManager> cgroups;
  auto detected = sandbox::DetectCgroups(config.cgroup_name);
  if (detected.ok()) {
    cgroups = std::move(*detected);
    int stale = cgroups->SweepStale();
    if (verbose) {
      std::fprintf(stderr, "sandrund: cgroup %s; swept %d stale run cgroups\n",
                   cgroups->version().c_str(), stale);
    }
  } else if (config.require_cgroups) {
    host.problems += detected.error().message +
                     " (or set require_cgroups: false to run with weaker rlimit-only limits)\n";
  } else {
    std::fprintf(stderr,
                 "sandrund: WARNING: %s\nsandrund: WARNING: running without cgroups: memory is "
                 "capped per process by RLIMIT_AS (address space) and processes per uid by "
                 "RLIMIT_NPROC; CPU and memory usage figures come from rusage only\n",
                 detected.error().message.c_str());
  }
  if (filter.ok() && host.problems.empty()) {
    host.launcher = std::make_unique<sandbox::Launcher>(std::move(*filter), std::move(cgroups));
  }
  return host;
}

server::FcgiServer* g_server = nullptr;

int Check(const config::Config& config) {
  Host host = PrepareHost(config, false);
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
  std::string config_path;
  bool check = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      Usage();
      return 0;
    } else if (arg == "--config" && i + 1 < argc) {
      config_path = argv[++i];
    } else if (arg == "check") {
      check = true;
    } else {
      std::fprintf(stderr, "sandrund: unknown argument '%s' (see --help)\n", arg.c_str());
      return 2;
    }
  }
  auto loaded = config::Load(config_path);
  if (!loaded.ok()) {
    std::fprintf(stderr, "sandrund: config: %s\n", loaded.error().message.c_str());
    return 2;
  }
  const config::Config& config = *loaded;
  // Writes to a closed pipe (a client gone, a sandbox's stdin) must be errors, not deaths.
  ::signal(SIGPIPE, SIG_IGN);
  for (const auto& dir : {config.state_dir, config.runs_dir, config.artifacts_dir}) {
    if (Status s = sys::MakeDirs(dir, 0755); !s.ok()) {
      std::fprintf(stderr, "sandrund: %s\n", s.error().message.c_str());
      return 1;
    }
  }
  int swept = SweepRuns(config.runs_dir);
  if (check) return Check(config);

  Host host = PrepareHost(config, true);
  if (!host.problems.empty()) {
    std::fprintf(stderr, "sandrund: this host cannot run sandboxes:\n%s", host.problems.c_str());
  }
  if (host.problems.find("cgroup") != std::string::npos && config.require_cgroups) return 1;
  api::Service service(config, host.launcher.get(), host.problems);
  if (host.launcher) {
    std::string error = service.SelfTest();
    if (!error.empty()) std::fprintf(stderr, "sandrund: %s\n", error.c_str());
  }
  // Block the stop signals in every thread; one thread waits for them (sigwait).
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  server::ServerOptions options;
  options.socket_path = config.fcgi_socket;
  options.threads = static_cast<int>(config.max_concurrent_runs + config.max_queue + 4);
  options.max_body_bytes = config.max_body_bytes;
  server::FcgiServer server(options);
  if (Status s = server.Open(); !s.ok()) {
    std::fprintf(stderr, "sandrund: %s\n", s.error().message.c_str());
    return 1;
  }
  std::fprintf(stderr, "sandrund: listening on %s (%lld sandboxes at once, queue %lld; swept %d "
               "stale runs)\n", config.fcgi_socket.c_str(),
               static_cast<long long>(config.max_concurrent_runs),
               static_cast<long long>(config.max_queue), swept);
  g_server = &server;
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&stop, &sig);
    std::fprintf(stderr, "sandrund: signal %d: stopping\n", sig);
    server.Stop();
    // Runs in flight get a short grace; then exit: their sandboxes die with us (PDEATHSIG)
    // and the next start sweeps their directories and cgroups.
    std::this_thread::sleep_for(std::chrono::seconds(3));
    std::fprintf(stderr, "sandrund: runs still in flight after 3 s; exiting\n");
    SweepRuns(config.runs_dir);
    std::_Exit(0);
  });
  waiter.detach();
  server.Serve([&](const api::HttpRequest& r) { return service.Handle(r); });
  SweepRuns(config.runs_dir);
  std::fprintf(stderr, "sandrund: stopped\n");
  return 0;
}
