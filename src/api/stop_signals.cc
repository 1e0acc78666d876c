#include "api/stop_signals.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "api/config_reload.h"

namespace sandrun::api {

sigset_t BlockStopSignals() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  return stop;
}

StopSignals::StopSignals(sigset_t signals, std::string config_path, config::Config started,
                         Service& service, Hooks hooks)
    : signals_(signals),
      config_path_(std::move(config_path)),
      started_(std::move(started)),
      service_(service),
      hooks_(std::move(hooks)) {}

StopSignals::~StopSignals() { Join(); }

void StopSignals::Start() {
  thread_ = std::thread([this] { Wait(); });
}

void StopSignals::Join() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    served_ = true;
  }
  served_cv_.notify_all();
  thread_.join();
}

void StopSignals::Wait() {
  int sig = 0;
  while (sigwait(&signals_, &sig) == 0 && sig == SIGHUP) {
    ReloadConfig(config_path_, started_, &service_);
  }
  const auto drain_limit = std::chrono::seconds(service_.LiveConfig()->ceilings.wall_time_s + 10);
  std::fprintf(stderr, "sandrund: signal %d: stopping; %lld runs in flight may finish\n", sig,
               static_cast<long long>(service_.RunsInFlight()));
  service_.BeginDrain();
  const auto deadline = std::chrono::steady_clock::now() + drain_limit;
  while (service_.RunsInFlight() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  service_.StopWarmPool();
  service_.EndKernels();  // no kernel outlives the daemon: processes, cgroups, directories
  hooks_.stop_server();
  // The owner is blocked in Join() (which waits for this thread) once Serve() returned, so
  // everything here stays valid; only a server that never stops gets us past the grace.
  std::unique_lock lock(mu_);
  if (served_cv_.wait_for(lock, std::chrono::seconds(3), [this] { return served_; })) return;
  std::fprintf(stderr,
               "sandrund: the server did not stop within 3 s of the drain (requests in "
               "flight, or a worker waiting on sandrund.socket's socket); exiting\n");
  if (hooks_.before_exit) hooks_.before_exit();
  std::_Exit(0);
}

}  // namespace sandrun::api
