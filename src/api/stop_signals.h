// The daemon's stop and reload signals.
//
// SIGTERM drains: new runs get 503 "stopping" while the server still
// answers, runs in flight go on up to their wall limit (the ceiling, plus a margin for
// export), then the server stops. Past that, exit: the sandboxes left die with us (init's
// PDEATHSIG and lifeline) and the next start sweeps their cgroups. SIGHUP re-reads the
// config's live keys (api/config_reload.h) and goes on waiting.
#pragma once

#include <signal.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "api/service.h"
#include "config/config.h"

namespace sandrun::api {

// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread, and so in every thread started
// after it; StopSignals waits for them (sigwait). Call it before starting any thread.
sigset_t BlockStopSignals();

// The thread that waits for the signals. It refers to nothing of its owner's after Join
// returns, and Join returns whenever the server stopped within the grace (below): the
// owner's objects (service, server, config) may then be destroyed.
class StopSignals {
 public:
  struct Hooks {
    std::function<void()> stop_server;  // makes Serve() return (FcgiServer::Stop)
    // When the server did not stop within the grace: the last clean-up before _Exit(0).
    // Runs on the signal thread while the owner is still in Serve(); must use only what
    // it owns (copies), not the owner's objects.
    std::function<void()> before_exit;
  };

  // `config_path`: the daemon's --config; `started`: the config as loaded (what a reload
  // compares with). `service` must outlive Join().
  StopSignals(sigset_t signals, std::string config_path, config::Config started, Service& service,
              Hooks hooks);
  ~StopSignals();  // Join()
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  void Start();
  // Call once Serve() returned (it only returns after hooks.stop_server ran): tells the
  // thread the server stopped, so it does not exit the process, and joins it.
  void Join();

 private:
  void Wait();

  const sigset_t signals_;
  const std::string config_path_;
  const config::Config started_;
  Service& service_;
  const Hooks hooks_;
  std::mutex mu_;
  std::condition_variable served_cv_;
  bool served_ = false;
  std::thread thread_;
};

}  // namespace sandrun::api
