// The API: one handler per endpoint behind Handle(): routing, access, encoding, health,
// readiness and metrics. POST /run's pipeline is the run engine's (run/engine.h), below this
// edge; a refusal of the engine becomes an API error in errors.cc. Thread-safe.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "api/http.h"
#include "api/rate_limit.h"
#include "api/run_codec.h"
#include "config/config.h"
#include "kernel/kernel_manager.h"
#include "run/engine.h"
#include "sandbox/runner.h"

namespace sandrun::api {

// Whether a POST /run asks for the streamed answer (Accept: application/x-ndjson) and the
// server can stream it (request.stream).
bool WantsStream(const HttpRequest& request);

class Service {
 public:
  // `runner` (a Launcher) may be null when the host cannot sandbox; /healthz then reports
  // `health_error` and /run answers 503. `run_tmpfs` mounts each stateless run's tmpfs
  // (KernelTmpfs(), root only; a test passes one that does not mount). Both outlive the
  // Service.
  Service(const config::Config& config, const sandbox::SandboxRunner* runner,
          std::string health_error, const run::RunTmpfs& run_tmpfs = run::KernelTmpfs());

  // Runs a real sandbox (`echo`) and records the outcome for /healthz. Returns the error
  // message, or "" when the self-test passed.
  std::string SelfTest();

  // Builds, once, in a sandbox (prepared_caches.cc): matplotlib's font cache, of which every later
  // run gets a copy in its MPLCONFIGDIR, so `import matplotlib.pyplot` does not rebuild it;
  // and the bytecode of the Python support files, placed beside them in every run. Returns
  // what could not be built and why (runs then do without: slower, not different). Call
  // after SelfTest, before serving and before the warm pool starts: not thread-safe.
  std::vector<std::string> PrepareCaches();

  // Called by the janitor after each sweep: deletes sessions idle past session_idle_s
  // (returns how many) and records the artifact store's size for /metrics. Thread-safe.
  int SweepIdleSessions() const { return engine_.SweepIdleSessions(); }
  void SetArtifactUsage(uint64_t files, uint64_t bytes) {
    artifact_files_ = files;
    artifact_bytes_ = bytes;
  }

  // Prepared environments (environments.cc): starts building each set of
  // environments_prebuild in the background (returns at once; call after SelfTest), and, from
  // the janitor, evicts least-recently-used ones past environments_max_mb (returns how many).
  void PrebuildEnvironments() { engine_.PrebuildEnvironments(); }
  int SweepEnvironments() { return engine_.SweepEnvironments(); }

  // Limits weaker than designed on this host (no cgroups), listed by /healthz.
  void SetWeakerLimits(std::vector<std::string> lines) { weaker_limits_ = std::move(lines); }

  // Stop taking runs (SIGTERM): /run answers 503 "stopping" and /healthz 503; runs already
  // admitted go on. Thread-safe.
  void BeginDrain() { engine_.BeginDrain(); }
  // Ends every Python kernel of stateful sessions (the daemon stops; before the runs
  // directory is swept).
  void EndKernels() { engine_.kernels().EndAll(); }
  // For the Jupyter server (src/jupyter/): the kernels of stateful runs, which its kernels
  // join (max_kernels, kernel_idle_s, EndKernels); the spec of a kernel with `live`'s limits,
  // as a stateful run with the defaults gets; and why kernels cannot run on this host ("" when
  // they can: cgroups with a freezer).
  kernel::KernelManager& kernels() { return engine_.kernels(); }
  kernel::KernelSpec JupyterKernelSpec(const config::Config& live) const {
    return engine_.JupyterKernelSpec(live);
  }
  std::string KernelsUnavailable() const { return engine_.KernelsUnavailable(); }
  // The files of the Jupyter server's kernels: the engine's (run/jupyter_files.cc), with the
  // links' base URL taken from the request as a run's are.
  static constexpr const char* kJupyterSession = run::Engine::kJupyterSession;
  using JupyterFiles = run::Engine::JupyterFiles;
  std::string RestoreJupyterWorkspace(const std::string& user, const std::string& workspace,
                                      sandbox::RunCgroup* cgroup) {
    return engine_.RestoreJupyterWorkspace(user, workspace, cgroup);
  }
  storage::FileStamps StampJupyterWorkspace(const std::string& workspace) {
    return engine_.StampJupyterWorkspace(workspace);
  }
  JupyterFiles ExportJupyterWorkspace(const HttpRequest& request, const std::string& user,
                                      const std::string& workspace, bool save,
                                      storage::FileStamps* stamps) {
    return engine_.ExportJupyterWorkspace(PublicBaseUrl(request), user, workspace, save, stamps);
  }
  // The warm pool (warm_pool.h, config `pool`): starts filling it in the background (call
  // after PrepareCaches, once the signal mask is set), and ends it (every waiting sandbox
  // killed, its directory and cgroup removed; before the runs directory is swept).
  void StartWarmPool() {
    if (runner_ != nullptr && health_error_.empty()) engine_.StartWarmPool();
  }
  void StopWarmPool() { engine_.StopWarmPool(); }
  // Runs holding a sandbox slot now.
  int64_t RunsInFlight() const { return engine_.admission().active(); }

  // Never throws; unexpected exceptions become a 500 naming the request id. Fills the
  // response's LogFields for the server's log line.
  HttpResponse Handle(const HttpRequest& request);

  // The config of requests that start now: the start-up one, or the last SetConfig().
  std::shared_ptr<const config::Config> LiveConfig() const { return engine_.LiveConfig(); }
  // SIGHUP (config/reload.h): requests that start after this read `next` for the keys that
  // change live; each request keeps the snapshot it started with. Thread-safe.
  void SetConfig(std::shared_ptr<const config::Config> next) { engine_.SetConfig(std::move(next)); }

 private:
  HttpResponse Route(const HttpRequest& request);
  // GET /readyz: whether a run could start now (readiness.cc).
  HttpResponse HandleReady() const;
  // The LogFields of the request this thread is handling (Handle() resets and returns them).
  static LogFields& Notes();
  // POST /run (run_endpoint.cc): AcceptRun, then the engine (run::Engine::Run), then the
  // answer: the response encoded (run_codec.h), or the refusal as an API error (errors.cc).
  // `trusted`: skip bearer-token checks (the start-up self-test).
  // `events`: a streamed run's sink (streamed_run.cc), null for a plain one.
  HttpResponse HandleRun(const HttpRequest& request, bool trusted = false,
                         run::EventSink* events = nullptr);
  // POST /run with Accept: application/x-ndjson (streamed_run.cc): HandleRun reporting to an
  // NdjsonSink on request.stream, then the displays, files and result (or the error) as
  // events; a refusal before any step started is the plain answer.
  HttpResponse HandleStreamedRun(const HttpRequest& request);
  // Origin, bearer token, rate, content type, whether runs are taken now; then decodes the
  // body into `run` (with the link base of the request) and the X-Sandrun-Session-Seen header
  // into `session_seen`. The refusal (401, 400, 403, 415, 429, 503) or nullopt.
  std::optional<HttpResponse> AcceptRun(const HttpRequest& request, bool trusted,
                                        const config::Config& live, RunRequest* run,
                                        bool* session_seen) const;
  HttpResponse HandleHealth() const;
  HttpResponse HandleMetrics() const;
  std::string PublicBaseUrl(const HttpRequest& request) const;
  // Counts a finished run for /metrics (sandrun_runs_total by status, the duration
  // histogram); a run whose sandbox could not be built counts as "sandbox_error", 0 ms.
  void Count(RunStatus status, int64_t wall_ms);
  void CountSandboxError() { CountName("sandbox_error", 0); }
  void CountName(const std::string& status, int64_t wall_ms);

  // The start-up config. Keys that change live (config::IsLiveKey) must be read from a
  // LiveConfig() snapshot instead, taken once per request.
  const config::Config& config_;
  const sandbox::SandboxRunner* runner_;
  std::string health_error_;
  std::vector<std::string> weaker_limits_;
  std::atomic<uint64_t> artifact_files_{0};
  std::atomic<uint64_t> artifact_bytes_{0};
  // POST /run per user: 10 r/s, 20 more at once (nginx's former per-user zone).
  mutable RateLimiter rate_limiter_{10, 20};
  run::Engine engine_;
  mutable std::mutex metrics_mu_;
  std::map<std::string, int64_t> runs_by_status_;
  std::vector<int64_t> duration_buckets_;  // counts per kDurationBucketsMs bound
  int64_t duration_count_ = 0;
  double duration_sum_s_ = 0;
};

}  // namespace sandrun::api
