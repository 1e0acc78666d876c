// The API: one handler per endpoint behind Handle(). The one place that sees config,
// sandbox and storage together (docs/STYLE.md layout rule). Thread-safe.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "api/admission.h"
#include "api/display_manifest.h"
#include "api/http.h"
#include "api/rate_limit.h"
#include "api/run_codec.h"
#include "api/run_dir.h"
#include "api/run_steps.h"
#include "api/warm_pool.h"
#include "config/config.h"
#include "kernel/kernel_manager.h"
#include "sandbox/runner.h"
#include "storage/environment_store.h"
#include "storage/export.h"
#include "storage/session_store.h"

namespace sandrun::api {

// The languages of `config.pool` that can be pooled (a warm argv, WarmArgv) with their sizes;
// none without a sandbox (`can_sandbox` false). Pure.
std::map<std::string, int64_t> WarmPoolSizes(const config::Config& config, bool can_sandbox);
// The argv of a waiting sandbox of `language`: for the Python loader form [python,
// "{loader}", "{file}"] the warm loader (sandrun_warm.py); for [.../bash, "{file}"] a bash that
// reads the start line; nullopt for any other form (such a language always runs cold). Pure.
std::optional<std::vector<std::string>> WarmArgv(const config::Language& language);
// The start line a waiting sandbox reads: "<cpu_time_s> <file_size_bytes> <program>\n" with
// the limits of `spec` and its program path (the last argv entry). Pure.
std::string WarmStartLine(const sandbox::SandboxSpec& spec);

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
          std::string health_error, const RunTmpfs& run_tmpfs = KernelTmpfs());

  // Runs a real sandbox (`echo`) and records the outcome for /healthz. Returns the error
  // message, or "" when the self-test passed.
  std::string SelfTest();

  // Builds, once, in a sandbox (prepared_caches.cc): matplotlib's font cache, of which every later
  // run gets a copy in its MPLCONFIGDIR, so `import matplotlib.pyplot` does not rebuild it;
  // and the bytecode of the Python support files, placed beside them in every run. Returns
  // what could not be built and why (runs then do without: slower, not different). Call
  // after SelfTest, before serving and before the warm pool starts: not thread-safe.
  std::vector<std::string> PrepareCaches();
  // Puts the prepared font cache (if any) in a run's `tmp` as matplotlib/fontlist-vNNN.json,
  // owned by the sandbox user: matplotlib's MPLCONFIGDIR (/tmp/matplotlib). Best effort.
  void PlaceFontCache(const std::string& tmp) const;

  // Called by the janitor after each sweep: deletes sessions idle past session_idle_s
  // (returns how many) and records the artifact store's size for /metrics. Thread-safe.
  int SweepIdleSessions() const { return sessions_.SweepIdle(config_.session_idle_s); }
  void SetArtifactUsage(uint64_t files, uint64_t bytes) {
    artifact_files_ = files;
    artifact_bytes_ = bytes;
  }

  // Prepared environments (environments.cc): starts building each set of
  // environments_prebuild in the background (returns at once; call after SelfTest), and, from
  // the janitor, evicts least-recently-used ones past environments_max_mb (returns how many).
  void PrebuildEnvironments();
  int SweepEnvironments();

  // Limits weaker than designed on this host (no cgroups), listed by /healthz.
  void SetWeakerLimits(std::vector<std::string> lines) { weaker_limits_ = std::move(lines); }

  // Stop taking runs (SIGTERM): /run answers 503 "stopping" and /healthz 503; runs already
  // admitted go on. Thread-safe.
  void BeginDrain() { draining_ = true; }
  // Ends every Python kernel of stateful sessions (the daemon stops; before the runs
  // directory is swept).
  void EndKernels() { kernels_.EndAll(); }
  // For the Jupyter server (src/jupyter/): the kernels of stateful runs, which its kernels
  // join (max_kernels, kernel_idle_s, EndKernels); the spec of a kernel with `live`'s limits,
  // as a stateful run with the defaults gets; and why kernels cannot run on this host ("" when
  // they can: cgroups with a freezer).
  kernel::KernelManager& kernels() { return kernels_; }
  kernel::KernelSpec JupyterKernelSpec(const config::Config& live) const;
  std::string KernelsUnavailable() const;
  // The warm pool (warm_pool.h, config `pool`): starts filling it in the background (call
  // after PrepareCaches, once the signal mask is set), and ends it (every waiting sandbox
  // killed, its directory and cgroup removed; before the runs directory is swept).
  void StartWarmPool();
  void StopWarmPool() { pool_.Stop(); }
  // The files of the Jupyter server's kernels (jupyter_files.cc): a kernel's workspace is
  // the user's session kJupyterSession, restored when the kernel starts and saved after each
  // execute that changed it; the files an execute made or changed are published as a run's.
  static constexpr const char* kJupyterSession = "jupyter";
  // What an execute left in its kernel's workspace.
  struct JupyterFiles {
    std::vector<storage::ArtifactFile> files;   // published, as a run's `files`
    std::vector<storage::SkippedFile> skipped;  // as a run's `files_skipped`
    std::string notes;                          // sandrun's lines (quota, session not saved)
  };
  // Fills a new kernel's `workspace` from the session (as a run's restore, from a helper in
  // the kernel's `cgroup`). "" when done (or the session has no files); else why not (the
  // kernel then starts empty, and must not save the session).
  std::string RestoreJupyterWorkspace(const std::string& user, const std::string& workspace,
                                      sandbox::RunCgroup* cgroup);
  // The stamps of `workspace` (as a run's before its code runs; waits past their timestamps).
  storage::FileStamps StampJupyterWorkspace(const std::string& workspace);
  // After an execute: when `workspace` is not as `stamps` says, publishes its new and
  // changed files as a run's export does (max_files, file_size_mb, the user's quota) and,
  // with `save`, saves the session and ends the session's stateful kernel (its files are
  // stale); `stamps` then describe the workspace. `request`: for the links' base URL.
  JupyterFiles ExportJupyterWorkspace(const HttpRequest& request, const std::string& user,
                                      const std::string& workspace, bool save,
                                      storage::FileStamps* stamps);
  // Runs holding a sandbox slot now.
  int64_t RunsInFlight() const { return admission_.active(); }

  // Never throws; unexpected exceptions become a 500 naming the request id. Fills the
  // response's LogFields for the server's log line.
  HttpResponse Handle(const HttpRequest& request);

  // The config of requests that start now: the start-up one, or the last SetConfig().
  std::shared_ptr<const config::Config> LiveConfig() const { return live_.load(); }
  // SIGHUP (config/reload.h): requests that start after this read `next` for the keys that
  // change live; each request keeps the snapshot it started with. Thread-safe.
  void SetConfig(std::shared_ptr<const config::Config> next) { live_.store(std::move(next)); }

 private:
  HttpResponse Route(const HttpRequest& request);
  // GET /readyz: whether a run could start now (readiness.cc).
  HttpResponse HandleReady() const;
  // The LogFields of the request this thread is handling (Handle() resets and returns them).
  static LogFields& Notes();
  // POST /run, in phases: AcceptRun, the plan (PlanMarkdown or SplitCodePipLines),
  // PrepareEnvironment, Admit, then HandleStatefulRun, HandleNotebookRun or
  // HandleStatelessRun.
  // `trusted`: skip bearer-token checks (the start-up self-test).
  // `events`: a streamed run's sink (streamed_run.cc), null for a plain one.
  HttpResponse HandleRun(const HttpRequest& request, bool trusted = false,
                         run::EventSink* events = nullptr);
  // POST /run with Accept: application/x-ndjson (streamed_run.cc): HandleRun reporting to an
  // NdjsonSink on request.stream, then the displays, files and result (or the error) as
  // events; a refusal before any step started is the plain answer.
  HttpResponse HandleStreamedRun(const HttpRequest& request);
  // Origin, bearer token, content type, whether runs are taken now; then decodes the body
  // into `run` and the X-Sandrun-Session-Seen header into `session_seen`. The refusal
  // (401, 400, 403, 415, 503) or nullopt.
  std::optional<HttpResponse> AcceptRun(const HttpRequest& request, bool trusted,
                                        const config::Config& live, RunRequest* run,
                                        bool* session_seen) const;
  // Locks the run's session (if it names one), then takes a sandbox slot into `ticket`.
  // The refusal (409 session_busy, 503 busy or stopping, 500) or nullopt.
  std::optional<HttpResponse> Admit(const RunRequest& run, storage::SessionLock* session,
                                    std::optional<Admission::Ticket>* ticket);
  // What a run's response carries that was decided before its steps ran.
  struct RunPreamble {
    std::optional<std::vector<PlanEntry>> plan;    // with markdown
    std::optional<EnvironmentReport> environment;  // PrepareEnvironment's report
    std::optional<bool> session_restarted;         // with a session (session_continuity.h)
  };
  // An admitted stateless run `id`: its cgroup and RunDir, FillWorkspace, RunSteps, then
  // ExportAndRespond. 500 sandbox_error when a sandbox (or its cgroup or directory) could
  // not be made.
  HttpResponse HandleStatelessRun(const HttpRequest& request, const RunRequest& run,
                                  const config::Config& live, RunPreamble preamble,
                                  const storage::SessionLock& session, const std::string& id);
  // The cgroup and run directory (its tmpfs of disk_mb, plus install_disk_mb with an install
  // step) of a cold run `id`. Errors: the cgroup's or the directory's (HandleStatelessRun
  // answers 500 sandbox_error).
  Result<std::shared_ptr<RunTeardown>> MakeRunDir(const RunRequest& run,
                                                  const std::string& id) const;
  // The files a stateless run starts with, before any of its code runs: matplotlib's font
  // cache, the session's files (RestoreSession), the input files, the blocks saved under a
  // name, and every program file. Fills `before` with the stamps of the files the run
  // starts with (PlaceRunFiles). The error response (400 for a bad input path,
  // RestoreSession's, 500) or nullopt.
  std::optional<HttpResponse> FillWorkspace(const RunRequest& run,
                                            const storage::SessionLock& session,
                                            const RunPaths& paths, const std::string& id,
                                            sandbox::RunCgroup* cgroup,
                                            storage::FileStamps* before) const;
  // Places the request's input files and the blocks saved under a name (save_as) in
  // `workspace` (storage::PlaceFile: never through a link), then sets `stamps` to the
  // stamps of every file the workspace then holds (storage::StampWorkspace: the session's,
  // the placed ones, a kept kernel's from earlier runs) and waits until a write can no longer
  // leave a stamp as it is (storage::WaitPastTimestamp). The 400 of a path that cannot be
  // written (field "files" or "markdown"), 500 storage, or nullopt.
  std::optional<HttpResponse> PlaceRunFiles(const RunRequest& run, const std::string& workspace,
                                            storage::FileStamps* stamps) const;
  // Runs the programs of run.steps in order in one workspace (stops at the first failure
  // unless continue_on_error, or when the run's budget is spent) and joins their results.
  // An Error (code "sandbox") when a sandbox could not be built (HandleRun answers 500
  // sandbox_error).
  // `warm`: a sandbox of the warm pool for the one program step (TakeWarmSandbox), or null.
  // `zygote`: the run fits the zygote (ZygoteShapeFits): its program step asks for it.
  Result<RunResponse> RunSteps(const RunRequest& run, const std::string& id, const RunPaths& paths,
                               sandbox::RunCgroup* cgroup, sandbox::WaitingSandbox* warm,
                               bool zygote = false) const;
  // Runs program step `i` of `run` in the sandbox `spec` (StepSpec) in the run's `cgroup`
  // and describes it (DescribeStep). The one place a step meets the sandbox. Errors: the
  // runner's ("sandbox").
  // With `warm` (not yet used) the step runs there (RunWaiting) instead of a new sandbox; a
  // warm sandbox that ended while waiting is not the run's failure: the step starts cold.
  // With `zygote` (and no `warm`) the step's sandbox starts from the zygote.
  Result<StepRun> RunStep(const RunRequest& run, size_t i, const sandbox::SandboxSpec& spec,
                          sandbox::RunCgroup* cgroup, sandbox::WaitingSandbox* warm,
                          bool zygote = false) const;
  // Whether `run` can start from the zygote (config `zygote`): the shape the warm pool fits
  // (a stateless run of one Python program, no session, prepared environment, network or
  // install step), any disk_mb (the zygote makes the sandbox new).
  bool ZygoteShapeFits(const RunRequest& run, bool session_held) const;
  // Whether `run` can take a sandbox of the warm pool (warm_start.cc): a stateless run of one
  // program step in a pooled language, with no session, prepared environment, network or
  // install step, and the pool's disk_mb (the default).
  bool WarmShapeFits(const RunRequest& run, bool session_held) const;
  // One sandbox of the warm pool for `language`, with its run directory and cgroup: the
  // support files and font cache in place, rlimits at the ceilings (the start line lowers
  // them), the default memory and process limits (RunWaiting writes the run's).
  Result<std::unique_ptr<WarmSandbox>> MakeWarmSandbox(const std::string& language) const;
  // A sandbox of the warm pool for `run` when it fits one and one is ready, its directory
  // and cgroup renamed to `run_id`; null otherwise (the run starts cold).
  std::unique_ptr<WarmSandbox> TakeWarmSandbox(const RunRequest& run, bool session_held,
                                               const std::string& run_id);
  // A stateless Python program sent as `code` with notebook lines (`!pip install x`,
  // `%pip install x`, `%matplotlib inline`): the pip lines run first as an install step of
  // the shell, as in a markdown block, and stay in the program as comments.
  // Nothing changes without such lines or without a configured "bash".
  void SplitCodePipLines(RunRequest* run) const;
  // Turns a markdown message into steps and the plan (DESIGN.md §5).
  std::optional<ApiError> PlanMarkdown(const std::string& markdown, int block,
                                       std::vector<CodeStep>* steps,
                                       std::optional<std::vector<PlanEntry>>* plan) const;
  // Copies the session's files into `workspace` from a helper in the run's `cgroup`
  // (SandboxRunner::RunHelper; null without cgroups), where the pages stay charged while the run
  // goes on; clears `stamps` (PlaceRunFiles takes them). Returns the error response (400
  // memory_limit / file_limit naming the limit, 500 otherwise) when it could not.
  std::optional<HttpResponse> RestoreSession(const storage::SessionLock& session,
                                             const std::string& workspace, const std::string& id,
                                             const config::Limits& limits,
                                             sandbox::RunCgroup* cgroup,
                                             storage::FileStamps* stamps) const;
  // The prepared environment of `run` (environments.cc): with `packages`, found, built or
  // waited for (up to environment_wait_s); without, one that serves the markdown's install
  // steps (FindServingEnvironment), if present. Fills run->environment_*, `lease` and
  // `report`. The refusal (403 network_forbidden, 503 environment_building) or the response
  // of a failed build (200, status error) otherwise.
  std::optional<HttpResponse> PrepareEnvironment(RunRequest* run, const config::Config& live,
                                                 storage::EnvironmentStore::Lease* lease,
                                                 std::optional<EnvironmentReport>* report);
  // A markdown run without `packages`: the present environment built from exactly the set of
  // its install steps' requirements, or one of environments_prebuild (the admin's choice)
  // that covers them (RequirementCovered of api/install_step.h); nullopt when none.
  std::optional<storage::EnvironmentStore::Answer> FindServingEnvironment(
      const RunRequest& run) const;
  // The environment of run.packages, found, built or waited for (up to environment_wait_s):
  // nullopt with `answer` cached or built; else the refusal (403 network_forbidden, 503
  // environment_building) or the 200 of a failed build.
  std::optional<HttpResponse> AcquireEnvironment(const RunRequest& run, const config::Config& live,
                                                 storage::EnvironmentStore::Answer* answer);
  // Builds `packages` into <build_dir>/ws/site in a sandbox with the network (Builder of
  // storage/environment_store.h).
  std::unique_ptr<storage::EnvironmentStore> MakeEnvironmentStore();
  storage::BuildResult BuildEnvironment(const std::string& build_dir,
                                        const std::vector<std::string>& packages) const;
  // A run with `stateful`: its Python runs in the session's kernel (stateful_run.cc), in
  // phases: CheckStateful, AcquireKernel, PlaceRunFiles, RunCells, PublishDisplays, then
  // ExportAndRespond as a stateless run.
  HttpResponse HandleStatefulRun(const HttpRequest& request, const RunRequest& run,
                                 const config::Config& live, RunPreamble preamble,
                                 const storage::SessionLock& session, const std::string& id);
  // The refusal of a stateful run this host or request cannot have (503 without cgroups,
  // 400 with stdin or a language other than python and bash) or nullopt.
  std::optional<HttpResponse> CheckStateful(const RunRequest& run) const;
  // The spec of the kernel pool's kernels (kernel/kernel_pool.h): a kernel as a run with the
  // live default limits, no network and no stdin gets it (KernelSpecFor).
  kernel::KernelSpec PooledKernelSpec() const;
  // Kernels the pool keeps (config kernel_pool_size), 0 where kernels cannot run (no
  // runner, no cgroup freezer).
  static int64_t KernelPoolSize(const config::Config& config, const sandbox::SandboxRunner* runner);
  // The session's kernel for `run` (KernelManager::Acquire), a new one filled from the
  // session (RestoreSession; its digests into `restored`). The refusal (RestoreSession's,
  // 503 busy, 500 sandbox_error) or nullopt.
  std::optional<HttpResponse> AcquireKernel(const RunRequest& run,
                                            const storage::SessionLock& session,
                                            const std::string& id,
                                            kernel::KernelManager::Acquired* acquired,
                                            storage::FileDigests* restored);
  // How the cells of a run ended: the kernel's last execution count, and whether a cell
  // lost the kernel (then why, for the session's next run).
  struct CellsEnd {
    int execution_count = 0;
    bool kernel_lost = false;
    std::string lost_reason;
  };
  // Runs the programs of run.steps as cells of kernel `k`, in order, within the run's wall
  // time and output budget (an install step's own wall time, as in RunSteps); joins their
  // results and collects what they showed into `rich`. `restart_note`: why the session's
  // previous kernel ended ("" when none did). Tracebacks name the cells of this run as
  // blocks ("block 2, line 3") when `name_blocks`. A cell that lost the kernel ends the run.
  RunResponse RunCells(const RunRequest& run, const std::string& id, kernel::Kernel& k,
                       const std::string& restart_note, bool name_blocks,
                       std::vector<kernel::RichOutput>* rich, CellsEnd* end) const;
  // Whether `run` is a notebook run (notebook_run.cc): not stateful, `notebook` (unset: on
  // for markdown), two Python programs or more and only Python and bash ones, no prepared
  // environment, a host with cgroups. Else its steps run as separate programs.
  bool IsNotebookRun(const RunRequest& run) const;
  // A notebook run: its Python blocks are cells of a kernel of its own (bash blocks %%bash
  // cells), started for it in a workspace filled as a stateless run's (session, input
  // files, saved blocks) and ended after the response; then ExportAndRespond as any run.
  HttpResponse HandleNotebookRun(const HttpRequest& request, const RunRequest& run,
                                 const config::Config& live, RunPreamble preamble,
                                 const storage::SessionLock& session, const std::string& id);
  // The response's displays from the kernel's `rich` outputs, images published as
  // figure-N.png under the run's id + "-displays".
  void PublishDisplays(const HttpRequest& request, const RunRequest& run,
                       const config::Config& live, const std::string& id,
                       const std::vector<kernel::RichOutput>& rich, RunResponse* response);
  // Where and how a run's files are published: the store, the link base and secret (with
  // this node's prefix), ttl and age, the user's quota less what the user's sessions hold.
  storage::PublishOptions MakePublishOptions(const HttpRequest& request, const RunRequest& run,
                                             const config::Config& live) const;
  // ExportAndRespond's export: the walk, PublishFiles, the session's save and the skipped
  // files' cap, into `response`.
  void ExportFiles(const HttpRequest& request, const RunRequest& run, const config::Config& live,
                   const std::string& workspace, const std::string& outputs_dir,
                   storage::FileStamps* stamps, const storage::SessionLock& session,
                   RunResponse& response);
  // Exports the files the run created or touched in `workspace` (not those whose stamp is
  // as `stamps` lists it: the run did not touch them) and those its display manifest in
  // `outputs_dir` names (none when empty: a stateful run), saves the session and encodes the
  // response. `live`: the request's snapshot of the live keys (quotas, link_ttl_s).
  HttpResponse ExportAndRespond(const HttpRequest& request, const RunRequest& run,
                                const config::Config& live, const std::string& workspace,
                                const std::string& outputs_dir, storage::FileStamps* stamps,
                                const storage::SessionLock& session, RunResponse& response);
  // Publishes the files the walk `found` in `workspace` and those `manifest` names in
  // `outputs_dir` (at most `max_file_bytes` each) into the artifact store; fills the
  // response's files, displays and skipped files;
  // status file_limit, with a note, when they are over the quota or the store failed.
  void PublishFiles(const HttpRequest& request, const RunRequest& run, const config::Config& live,
                    const std::string& workspace, const std::string& outputs_dir,
                    const DisplayManifest& manifest, const std::vector<storage::FoundFile>& found,
                    uint64_t max_file_bytes, RunResponse& response);
  // The key of a run's kernel: its user and session (two users never share one).
  static std::string KernelKey(const RunRequest& run) {
    return std::to_string(run.user.size()) + ":" + run.user + "/" + run.session;
  }
  HttpResponse HandleHealth() const;
  HttpResponse HandleMetrics() const;
  // Locks the run's session, waiting for its previous run if there is a place among the
  // waiters (WaiterGate); the refusal (409 session_busy with Retry-After, 500) otherwise.
  std::optional<HttpResponse> LockSession(const RunRequest& run, storage::SessionLock* lock);
  std::string PublicBaseUrl(const HttpRequest& request) const;
  // Counts a finished run for /metrics (sandrun_runs_total by status, the duration
  // histogram); a run whose sandbox could not be built counts as "sandbox_error", 0 ms.
  void Count(RunStatus status, int64_t wall_ms);
  void CountSandboxError() { CountName("sandbox_error", 0); }
  void CountName(const std::string& status, int64_t wall_ms);

  // The start-up config. Keys that change live (config::IsLiveKey) must be read from a
  // LiveConfig() snapshot instead, taken once per request.
  const config::Config& config_;
  std::atomic<std::shared_ptr<const config::Config>> live_;
  const sandbox::SandboxRunner* runner_;
  const RunTmpfs& run_tmpfs_;
  storage::SessionStore sessions_;
  std::string health_error_;
  std::vector<std::string> weaker_limits_;
  std::string font_cache_name_;                    // matplotlib's fontlist-vNNN.json; "" = none
  std::string font_cache_;                         // its content
  std::vector<SupportBytecode> support_bytecode_;  // by PrepareCaches; empty = none
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> artifact_files_{0};
  std::atomic<uint64_t> artifact_bytes_{0};
  mutable Admission admission_;
  // POST /run per user: 10 r/s, 20 more at once (nginx's former per-user zone).
  mutable RateLimiter rate_limiter_{10, 20};
  WaiterGate session_waiters_;
  WaiterGate environment_waiters_;  // requests waiting for an environment's build
  std::unique_ptr<storage::EnvironmentStore> environments_;  // null without a runner
  kernel::KernelManager kernels_;
  WarmPool pool_;
  mutable std::mutex metrics_mu_;
  std::map<std::string, int64_t> runs_by_status_;
  std::vector<int64_t> duration_buckets_;  // counts per kDurationBucketsMs bound
  int64_t duration_count_ = 0;
  double duration_sum_s_ = 0;
};

}  // namespace sandrun::api
