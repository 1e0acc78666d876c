// The run engine: POST /run's pipeline below the HTTP edge. A decoded request (RunRequest) in,
// its events out through the request's sink (run/event_sink.h), and at the end the run's
// result or a typed refusal (Refusal) that api/errors.cc alone turns into an HTTP status and
// code. The phases, in order, are the engine's own functions: plan (PlanMarkdown or
// SplitCodePipLines), environment (PrepareEnvironment), admission (Admit), workspace
// (FillWorkspace), steps (RunSteps) or cells (RunCells), export and publish, session save
// (ExportAndSave). Every sandbox it starts takes its limits from run/sandbox_specs.h.
// Knows nothing of HTTP. Thread-safe.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "kernel/kernel_manager.h"
#include "run/admission.h"
#include "run/display_manifest.h"
#include "run/refusal.h"
#include "run/run_dir.h"
#include "run/run_request.h"
#include "run/run_steps.h"
#include "run/warm_pool.h"
#include "sandbox/runner.h"
#include "storage/environment_store.h"
#include "storage/export.h"
#include "storage/session_store.h"
#include "util/result.h"

namespace sandrun::run {

// How a run ended: a refusal, or the response (its files published, the session saved).
struct RunEnd {
  std::optional<Refusal> refused;
  RunResponse response;  // without `refused`
  // The run went through its steps and export: it counts in the metrics and the log line
  // (a failed environment build's answer does not).
  bool finished = false;
  bool sandbox_error = false;  // a sandbox failed while the run ran: counts as sandbox_error
  int64_t queue_ms = -1;       // time waiting for a sandbox slot; -1: did not get there
  // Released after the answer has been sent: the run's tmpfs and cgroup, or its kernel.
  std::shared_ptr<void> after_send;
};
// The end of a run refused with `refusal` (after waiting `queue_ms` for a slot).
RunEnd Refused(Refusal refusal, int64_t queue_ms = -1);

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

class Engine {
 public:
  // `runner` (a Launcher) may be null when the host cannot sandbox (the HTTP edge then
  // refuses runs before they reach the engine). `run_tmpfs` mounts each stateless run's tmpfs
  // (KernelTmpfs(), root only; a test passes one that does not mount). Both outlive the Engine.
  Engine(const config::Config& config, const sandbox::SandboxRunner* runner,
         const RunTmpfs& run_tmpfs);

  // Runs `run` (decoded and admitted by the edge: access, rate, body) with `live`, the
  // request's snapshot of the live keys. `session_seen`: the client says the session had runs
  // before (api/session_continuity.h).
  RunEnd Run(RunRequest run, const config::Config& live, bool session_seen);

  // The config of runs that start now: the start-up one, or the last SetConfig().
  std::shared_ptr<const config::Config> LiveConfig() const { return live_.load(); }
  void SetConfig(std::shared_ptr<const config::Config> next) { live_.store(std::move(next)); }
  // Stop taking runs: a run that waited for its slot or session is refused (kStopping).
  void BeginDrain() { draining_ = true; }
  bool draining() const { return draining_; }

  // What the start-up build run produced (Service::PrepareCaches): matplotlib's font cache
  // ("" = none) and the support files' bytecode. Call before serving: not thread-safe.
  void SetPreparedCaches(std::string font_cache_name, std::string font_cache,
                         std::vector<SupportBytecode> bytecode);
  // Puts the prepared font cache (if any) in a run's `tmp` as matplotlib/fontlist-vNNN.json,
  // owned by the sandbox user: matplotlib's MPLCONFIGDIR (/tmp/matplotlib). Best effort.
  void PlaceFontCache(const std::string& tmp) const;

  const Admission& admission() const { return admission_; }
  // Requests waiting now for a busy session (WaiterGate).
  int64_t session_waiters() const { return session_waiters_.waiting(); }
  const WarmPool& pool() const { return pool_; }
  // Deletes sessions idle past session_idle_s; returns how many. Thread-safe.
  int SweepIdleSessions() const { return sessions_.SweepIdle(config_.session_idle_s); }
  // Prepared environments (environments.cc): starts building each set of
  // environments_prebuild in the background, and evicts least-recently-used ones past
  // environments_max_mb (returns how many).
  void PrebuildEnvironments();
  int SweepEnvironments();
  // The warm pool (warm_pool.h): starts filling it in the background, and ends it.
  void StartWarmPool() { pool_.Start(); }
  void StopWarmPool() { pool_.Stop(); }
  // The kernels of stateful runs, which the Jupyter server's kernels join; the spec of a
  // kernel with `live`'s limits, as a stateful run with the defaults gets; and why kernels
  // cannot run on this host ("" when they can: cgroups with a freezer).
  kernel::KernelManager& kernels() { return kernels_; }
  const kernel::KernelManager& kernels() const { return kernels_; }
  kernel::KernelSpec JupyterKernelSpec(const config::Config& live) const;
  std::string KernelsUnavailable() const;

  // The files of the Jupyter server's kernels (jupyter_files.cc): a kernel's workspace is the
  // user's session kJupyterSession, restored when the kernel starts and saved after each
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
  // stale); `stamps` then describe the workspace. Links start with `public_base_url`.
  JupyterFiles ExportJupyterWorkspace(const std::string& public_base_url, const std::string& user,
                                      const std::string& workspace, bool save,
                                      storage::FileStamps* stamps);

 private:
  // What a run's response carries that was decided before its steps ran.
  struct RunPreamble {
    std::optional<std::vector<PlanEntry>> plan;    // with markdown
    std::optional<EnvironmentReport> environment;  // PrepareEnvironment's report
    std::optional<bool> session_restarted;         // with a session (session_continuity.h)
  };
  // Locks the run's session (if it names one), then takes a sandbox slot into `ticket`
  // (the wait into `queue_ms`). The refusal (session_busy, busy or stopping, storage).
  std::optional<Refusal> Admit(const RunRequest& run, storage::SessionLock* session,
                               std::optional<Admission::Ticket>* ticket, int64_t* queue_ms);
  // Locks the run's session, waiting for its previous run if there is a place among the
  // waiters (WaiterGate); the refusal (session_busy with a retry, storage) otherwise.
  std::optional<Refusal> LockSession(const RunRequest& run, storage::SessionLock* lock);
  // An admitted stateless run `id`: its cgroup and RunDir, FillWorkspace, RunSteps, then
  // ExportAndSave. kSandboxError when a sandbox (or its cgroup or directory) could not be
  // made.
  RunEnd StatelessRun(const RunRequest& run, const config::Config& live, RunPreamble preamble,
                      const storage::SessionLock& session, const std::string& id);
  // The cgroup and run directory (its tmpfs of disk_mb, plus install_disk_mb with an install
  // step) of a cold run `id`. Errors: the cgroup's or the directory's.
  Result<std::shared_ptr<RunTeardown>> MakeRunDir(const RunRequest& run,
                                                  const std::string& id) const;
  // The files a stateless run starts with, before any of its code runs: matplotlib's font
  // cache, the session's files (RestoreSession), the input files, the blocks saved under a
  // name, and every program file. Fills `before` with the stamps of the files the run
  // starts with (PlaceRunFiles). The refusal (a bad input path, RestoreSession's, sandbox).
  std::optional<Refusal> FillWorkspace(const RunRequest& run, const storage::SessionLock& session,
                                       const RunPaths& paths, const std::string& id,
                                       sandbox::RunCgroup* cgroup,
                                       storage::FileStamps* before) const;
  // Places the request's input files and the blocks saved under a name (save_as) in
  // `workspace` (storage::PlaceFile: never through a link), then sets `stamps` to the
  // stamps of every file the workspace then holds (storage::StampWorkspace: the session's,
  // the placed ones, a kept kernel's from earlier runs) and waits until a write can no longer
  // leave a stamp as it is (storage::WaitPastTimestamp). The refusal of a path that cannot be
  // written (field "files" or "markdown"), storage.
  std::optional<Refusal> PlaceRunFiles(const RunRequest& run, const std::string& workspace,
                                       storage::FileStamps* stamps) const;
  // Runs the programs of run.steps in order in one workspace (stops at the first failure
  // unless continue_on_error, or when the run's budget is spent) and joins their results.
  // An Error (code "sandbox") when a sandbox could not be built.
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
  std::optional<Refusal> PlanMarkdown(const std::string& markdown, int block,
                                      std::vector<CodeStep>* steps,
                                      std::optional<std::vector<PlanEntry>>* plan) const;
  // Copies the session's files into `workspace` from a helper in the run's `cgroup`
  // (SandboxRunner::RunHelper; null without cgroups), where the pages stay charged while the run
  // goes on; clears `stamps` (PlaceRunFiles takes them). Returns the refusal (memory_limit /
  // file_limit naming the limit, sandbox or storage otherwise) when it could not.
  std::optional<Refusal> RestoreSession(const storage::SessionLock& session,
                                        const std::string& workspace, const std::string& id,
                                        const config::Limits& limits, sandbox::RunCgroup* cgroup,
                                        storage::FileStamps* stamps) const;
  // The prepared environment of `run` (environments.cc): with `packages`, found, built or
  // waited for (up to environment_wait_s); without, one that serves the markdown's install
  // steps (FindServingEnvironment), if present. Fills run->environment_*, `lease` and
  // `report`. The refusal (network_forbidden, environment_building) or the answer of a failed
  // build (status error, not `finished`) otherwise.
  std::optional<RunEnd> PrepareEnvironment(RunRequest* run, const config::Config& live,
                                           storage::EnvironmentStore::Lease* lease,
                                           std::optional<EnvironmentReport>* report);
  // A markdown run without `packages`: the present environment built from exactly the set of
  // its install steps' requirements, or one of environments_prebuild (the admin's choice)
  // that covers them (RequirementCovered of run/install_step.h); nullopt when none.
  std::optional<storage::EnvironmentStore::Answer> FindServingEnvironment(
      const RunRequest& run) const;
  // The environment of run.packages, found, built or waited for (up to environment_wait_s):
  // nullopt with `answer` cached or built; else the refusal (network_forbidden,
  // environment_building) or the answer of a failed build.
  std::optional<RunEnd> AcquireEnvironment(const RunRequest& run, const config::Config& live,
                                           storage::EnvironmentStore::Answer* answer);
  // Builds `packages` into <build_dir>/ws/site in a sandbox with the network (Builder of
  // storage/environment_store.h).
  std::unique_ptr<storage::EnvironmentStore> MakeEnvironmentStore();
  storage::BuildResult BuildEnvironment(const std::string& build_dir,
                                        const std::vector<std::string>& packages) const;
  // A run with `stateful`: its Python runs in the session's kernel (stateful_run.cc), in
  // phases: CheckStateful, AcquireKernel, PlaceRunFiles, RunCells, PublishDisplays, then
  // ExportAndSave as a stateless run.
  RunEnd StatefulRun(const RunRequest& run, const config::Config& live, RunPreamble preamble,
                     const storage::SessionLock& session, const std::string& id);
  // The refusal of a stateful run this host or request cannot have (unavailable without
  // cgroups, conflicting_fields with stdin or a language other than python and bash).
  std::optional<Refusal> CheckStateful(const RunRequest& run) const;
  // The spec of the kernel pool's kernels (kernel/kernel_pool.h): a kernel as a run with the
  // live default limits, no network and no stdin gets it (KernelSpecFor).
  kernel::KernelSpec PooledKernelSpec() const;
  // Kernels the pool keeps (config kernel_pool_size), 0 where kernels cannot run (no
  // runner, no cgroup freezer).
  static int64_t KernelPoolSize(const config::Config& config, const sandbox::SandboxRunner* runner);
  // The session's kernel for `run` (KernelManager::Acquire), a new one filled from the
  // session (RestoreSession; its digests into `restored`). The refusal (RestoreSession's,
  // busy, sandbox_error).
  std::optional<Refusal> AcquireKernel(const RunRequest& run, const storage::SessionLock& session,
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
  // Whether `run` is a notebook run (stateful_run.cc): not stateful, `notebook` (unset: on
  // for markdown), two Python programs or more and only Python and bash ones, no prepared
  // environment, a host with cgroups. Else its steps run as separate programs.
  bool IsNotebookRun(const RunRequest& run) const;
  // A notebook run: its Python blocks are cells of a kernel of its own (bash blocks %%bash
  // cells), started for it in a workspace filled as a stateless run's (session, input
  // files, saved blocks) and ended after the response; then ExportAndSave as any run.
  RunEnd NotebookRun(const RunRequest& run, const config::Config& live, RunPreamble preamble,
                     const storage::SessionLock& session, const std::string& id);
  // The response's displays from the kernel's `rich` outputs, images published as
  // figure-N.png under the run's id + "-displays".
  void PublishDisplays(const RunRequest& run, const config::Config& live, const std::string& id,
                       const std::vector<kernel::RichOutput>& rich, RunResponse* response);
  // Where and how a run's files are published: the store, the link base (the request's)
  // and secret (with this node's prefix), ttl and age, the user's quota less what the user's
  // sessions hold.
  storage::PublishOptions MakePublishOptions(const RunRequest& run,
                                             const config::Config& live) const;
  // Exports the files the run created or touched in `workspace` (not those whose stamp is
  // as `stamps` lists it: the run did not touch them) and those its display manifest in
  // `outputs_dir` names (none when empty: a stateful run), saves the session; the run's end
  // with `response`. `live`: the request's snapshot of the live keys (quotas, link_ttl_s).
  RunEnd ExportAndSave(const RunRequest& run, const config::Config& live,
                       const std::string& workspace, const std::string& outputs_dir,
                       storage::FileStamps* stamps, const storage::SessionLock& session,
                       RunResponse& response);
  // Publishes the files the walk `found` in `workspace` and those `manifest` names in
  // `outputs_dir` (at most `max_file_bytes` each) into the artifact store; fills the
  // response's files, displays and skipped files;
  // status file_limit, with a note, when they are over the quota or the store failed.
  void PublishFiles(const RunRequest& run, const config::Config& live, const std::string& workspace,
                    const std::string& outputs_dir, const DisplayManifest& manifest,
                    const std::vector<storage::FoundFile>& found, uint64_t max_file_bytes,
                    RunResponse& response);
  // The key of a run's kernel: its user and session (two users never share one).
  static std::string KernelKey(const RunRequest& run) {
    return std::to_string(run.user.size()) + ":" + run.user + "/" + run.session;
  }

  // The start-up config. Keys that change live (config::IsLiveKey) must be read from a
  // LiveConfig() snapshot instead, taken once per run.
  const config::Config& config_;
  std::atomic<std::shared_ptr<const config::Config>> live_;
  const sandbox::SandboxRunner* runner_;
  const RunTmpfs& run_tmpfs_;
  storage::SessionStore sessions_;
  std::string font_cache_name_;                    // matplotlib's fontlist-vNNN.json; "" = none
  std::string font_cache_;                         // its content
  std::vector<SupportBytecode> support_bytecode_;  // by SetPreparedCaches; empty = none
  std::atomic<bool> draining_{false};
  mutable Admission admission_;
  WaiterGate session_waiters_;
  WaiterGate environment_waiters_;  // requests waiting for an environment's build
  std::unique_ptr<storage::EnvironmentStore> environments_;  // null without a runner
  kernel::KernelManager kernels_;
  WarmPool pool_;
};

}  // namespace sandrun::run
