// The run engine (engine.h): plan -> environment -> admission -> workspace (session, input
// files, program files) -> steps in the sandbox -> export and publish -> session save.
// Engine::Run is the only entry; each phase is a function of its own below, in that order.
#include "run/engine.h"

#include <sys/wait.h>

#include <algorithm>
#include <chrono>

#include "python/support_files.h"
#include "run/environments.h"
#include "run/packages.h"
#include "run/run_dir.h"
#include "run/run_displays.h"
#include "run/run_steps.h"
#include "run/sandbox_specs.h"
#include "storage/artifact_store.h"
#include "storage/export.h"
#include "storage/session_restore.h"
#include "storage/workspace_file.h"
#include "sys/syscalls.h"
#include "util/phases.h"
#include "util/reserved_dirs.h"
#include "util/text.h"

namespace sandrun::run {
namespace {

// Writes every program file of the run and the support files into <workspace>/.sandrun (the
// daemon's own directory, made by RunDir::Create; nothing of the user's is in it yet).
Status WriteProgramFiles(const RunRequest& run, const std::string& workspace,
                         const std::vector<SupportBytecode>& bytecode) {
  if (Status s = WriteSupportFiles(workspace, bytecode); !s.ok()) return s;
  for (size_t i : PartitionSteps(run.steps).programs) {
    if (MultiStep(run)) {
      if (Status s =
              sys::MakeDirs(workspace + "/" + util::kProgramDir + "/" + std::to_string(i), 0755);
          !s.ok()) {
        return s;
      }
    }
    const std::string path = workspace + "/" + util::kProgramDir + "/" + ProgramPath(run, i);
    if (Status s = sys::WriteFile(path, ProgramText(run.steps[i]), 0644); !s.ok()) return s;
  }
  return OkStatus();
}

// Saves the workspace as the session's files, or says in stderr why not (the session then
// keeps its files from before this run). A run that hit a file limit does not save: what
// it left is what did not fit.
void SaveSession(const storage::SessionStore& sessions, const storage::SessionLock& session,
                 const std::string& workspace, const storage::Quota& quota, RunResponse& response) {
  const std::string kept = "; the session keeps its files from before this run";
  if (response.status == RunStatus::kFileLimit) {
    AppendLine(response.stderr_stream.text,
               "sandrun: session not saved: the run hit a file limit" + kept);
    return;
  }
  if (Status s = sessions.Save(session, workspace, quota); !s.ok()) {
    const std::string why = s.error().kind == ErrorKind::kOverBudget
                                ? "its files are over the per-user quota: " + s.error().message
                                : s.error().message;
    AppendLine(response.stderr_stream.text, "sandrun: session not saved: " + why + kept);
  }
}

// A run that makes 300000 files, or files with 16 KiB paths, must not make a response of
// megabytes: list the first skipped ones (by number and path bytes) and count the rest.
void CapSkipped(uint64_t unlisted, RunResponse& response) {
  constexpr size_t kMaxSkippedListed = 1000;
  constexpr size_t kMaxSkippedPathBytes = 256 << 10;
  size_t keep = 0, bytes = 0;
  for (const auto& skipped : response.files_skipped) {
    if (keep == kMaxSkippedListed || bytes + skipped.path.size() > kMaxSkippedPathBytes) break;
    bytes += skipped.path.size();
    ++keep;
  }
  unlisted += response.files_skipped.size() - keep;
  response.files_skipped.resize(keep);
  if (unlisted > 0) {
    AppendLine(response.stderr_stream.text,
               "sandrun: " + std::to_string(unlisted) +
                   " more skipped files are not listed in files_skipped");
  }
}

Refusal SessionBusy(const std::string& session, const std::string& why) {
  return Refusal{RefusalCode::kSessionBusy, "session '" + util::SanitizeUtf8(session) + "': " + why,
                 "session", ErrorKind::kBusy, 5};
}

// For runs that waited while the daemon began to stop (SIGTERM): the runs in flight finish.
Refusal Stopping() {
  return Refusal{RefusalCode::kStopping, "sandrun is stopping; retry shortly", "",
                 ErrorKind::kUnavailable, 5};
}

// The refill gate's load: the runs admitted, and the tasks runnable besides the refill
// thread asking (RefillMayStart counts at most the runs of them: a run that sleeps or waits
// uses no CPU); every run counts as on a CPU when /proc/loadavg cannot be read.
RefillLoad RunLoad(int64_t in_flight) {
  const int64_t runnable = sys::RunnableTasks();
  return RefillLoad{in_flight, runnable > 0 ? runnable - 1 : in_flight};
}

}  // namespace

Refusal Refuse(RefusalCode code, std::string message, std::string field) {
  return Refusal{code, std::move(message), std::move(field), ErrorKind::kSystem, 0};
}

Refusal RefuseError(const Error& error, std::string field) {
  return Refusal{RefusalCode::kError, error.message, std::move(field), error.kind, 0};
}

RunEnd Refused(Refusal refusal, int64_t queue_ms) {
  RunEnd end;
  end.refused = std::move(refusal);
  end.queue_ms = queue_ms;
  return end;
}

Engine::Engine(const config::Config& config, const sandbox::SandboxRunner* runner,
               const RunTmpfs& run_tmpfs)
    : config_(config),
      live_(std::make_shared<const config::Config>(config)),
      runner_(runner),
      run_tmpfs_(run_tmpfs),
      sessions_(config.state_dir + "/sessions", config.link_secret + ":session-dir"),
      admission_(config.max_concurrent_runs, config.max_queue,
                 std::chrono::seconds(config.queue_wait_s)),
      session_waiters_(config.session_max_waiters, config.session_max_waiters_total),
      environment_waiters_(config.session_max_waiters_total, config.session_max_waiters_total),
      // A kernel never outlives its session's expiry.
      kernels_(runner, {config.runs_dir,
                        std::min(config.kernel_idle_s, config.session_idle_s),
                        config.max_kernels,
                        // Boots pause as the warm pool's refills do (RefillMayStart).
                        {KernelPoolSize(config, runner), [this] { return PooledKernelSpec(); },
                         [this](std::chrono::milliseconds waited) {
                           const RefillGate gate{[this] { return RunLoad(admission_.active()); },
                                                 sys::UsableCpus()};
                           return RefillMayStart(gate, gate.load(), waited);
                         }}}),
      pool_(
          WarmPoolSizes(config, runner != nullptr),
          [this](const std::string& language) { return MakeWarmSandbox(language); },
          RefillGate{[this] { return RunLoad(admission_.active()); }, sys::UsableCpus()}) {
  if (runner_ != nullptr) environments_ = MakeEnvironmentStore();
}

std::optional<Refusal> Engine::LockSession(const RunRequest& run, storage::SessionLock* lock) {
  // Free: taken without waiting, and without a place among the waiters.
  auto locked = sessions_.Lock(run.user, run.session, std::chrono::milliseconds(0));
  if (!locked.ok() && locked.error().kind == ErrorKind::kBusy) {
    // Busy: waiting holds a worker thread, so only a few may (WaiterGate); the rest are told
    // at once to come back.
    WaiterGate::Pass pass = session_waiters_.Enter(std::to_string(run.user.size()) + ":" +
                                                   run.user + "/" + run.session);
    if (!pass.admitted()) {
      return SessionBusy(run.session,
                         "another run of this session is going and " +
                             std::to_string(config_.session_max_waiters) +
                             " more are waiting for it (or the server's waiters are all taken); "
                             "retry when it has finished");
    }
    locked = sessions_.Lock(run.user, run.session, std::chrono::seconds(config_.session_wait_s));
  }
  if (!locked.ok()) {
    if (locked.error().kind == ErrorKind::kBusy) {
      return SessionBusy(run.session, locked.error().message);
    }
    return Refuse(RefusalCode::kStorage, locked.error().message);
  }
  *lock = std::move(*locked);
  return std::nullopt;
}

std::optional<Refusal> Engine::RestoreSession(const storage::SessionLock& session,
                                              const std::string& workspace, const std::string& id,
                                              const config::Limits& limits,
                                              sandbox::RunCgroup* cgroup,
                                              storage::FileStamps* stamps) const {
  // Copied by a helper process in the run's own cgroup, so the workspace's tmpfs pages are
  // charged to the run, not to the daemon, and stay charged there while the run's programs
  // run in the same cgroup.
  std::vector<std::string> argv = {"/proc/self/exe", "restore-session"};
  for (auto& arg :
       storage::RestoreHelperArgs(session.dir(), workspace, static_cast<uid_t>(config_.sandbox_uid),
                                  static_cast<gid_t>(config_.sandbox_gid))) {
    argv.push_back(std::move(arg));
  }
  auto helper = runner_->RunHelper(argv, cgroup);
  if (!helper.ok()) {
    return Refuse(RefusalCode::kSandboxError, "run " + id + ": " + helper.error().message);
  }
  const int ws = helper->wait_status;
  if (helper->memory_limit || (WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL)) {
    return Refuse(RefusalCode::kMemoryLimit,
                  "the session's files do not fit in this run's memory limit (memory_mb " +
                      std::to_string(limits.memory_mb) +
                      "): a session's workspace is held in memory; raise memory_mb",
                  "limits.memory_mb");
  }
  const int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
  const std::string message = util::SanitizeUtf8(helper->stderr_text);
  if (code == storage::kRestoreFileLimit) {
    return Refuse(RefusalCode::kFileLimit,
                  "the session's files do not fit in this run's workspace (disk_mb " +
                      std::to_string(limits.disk_mb) + "): " + message,
                  "limits.disk_mb");
  }
  if (code != storage::kRestoreOk) {
    return Refuse(RefusalCode::kStorage, "run " + id + ": session restore: " + message);
  }
  // The helper's digests of the restored files are not what tells a file the run touched:
  // PlaceRunFiles stamps the workspace once everything is in it.
  stamps->clear();
  return std::nullopt;
}

std::optional<Refusal> Engine::Admit(const RunRequest& run, storage::SessionLock* session,
                                     std::optional<Admission::Ticket>* ticket, int64_t* queue_ms) {
  // The session first: a run waiting for its session's previous run must not hold a
  // sandbox slot meanwhile (others would get 503 while nothing runs).
  if (!run.session.empty()) {
    if (auto refused = LockSession(run, session)) return refused;
  }
  const auto queued_at = std::chrono::steady_clock::now();
  ticket->emplace(admission_.Acquire());
  *queue_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - queued_at)
                  .count();
  if (!(*ticket)->admitted()) {
    return Refusal{RefusalCode::kBusy, "all sandboxes are busy; retry shortly", "",
                   ErrorKind::kUnavailable, 5};
  }
  // Waited in the queue or for the session while the daemon began to stop.
  if (draining_) return Stopping();
  return std::nullopt;
}

RunEnd Engine::Run(RunRequest run, const config::Config& live, bool session_seen) {
  if (run.events) run.events->OutputBudget(static_cast<uint64_t>(run.limits.output_bytes));
  RunPreamble preamble;
  if (run.markdown) {
    if (auto refused = PlanMarkdown(*run.markdown, run.block, &run.steps, &preamble.plan)) {
      return Refused(std::move(*refused));
    }
    if (run.events && preamble.plan) run.events->Plan(EncodePlanJson(*preamble.plan));
  } else {
    SplitCodePipLines(&run);
  }
  // The prepared environment (`packages`), before the session and a sandbox slot: its build
  // may take long and holds neither.
  storage::EnvironmentStore::Lease environment_lease;
  if (auto end = PrepareEnvironment(&run, live, &environment_lease, &preamble.environment)) {
    return std::move(*end);
  }
  storage::SessionLock session;
  std::optional<Admission::Ticket> ticket;
  int64_t queue_ms = -1;
  if (auto refused = Admit(run, &session, &ticket, &queue_ms)) {
    return Refused(std::move(*refused), queue_ms);
  }
  util::StampPhase("admitted");

  const std::string id = util::RandomHex(16);
  // The client said the session had runs before, but this node had none of it
  // (api/session_continuity.h).
  if (session.held()) preamble.session_restarted = session_seen && session.created();
  RunEnd end = run.stateful         ? StatefulRun(run, live, std::move(preamble), session, id)
               : IsNotebookRun(run) ? NotebookRun(run, live, std::move(preamble), session, id)
                                    : StatelessRun(run, live, std::move(preamble), session, id);
  end.queue_ms = queue_ms;
  return end;
}

RunEnd Engine::StatelessRun(const RunRequest& run, const config::Config& live, RunPreamble preamble,
                            const storage::SessionLock& session, const std::string& id) {
  // A stateless run changes the session's files under its kernel: the kernel ends.
  if (session.held()) {
    kernels_.End(KernelKey(run), "a stateless run of the session changed its files");
  }
  // The run's one cgroup, for the session's restore and then every step:
  // what one of them leaves charged (the restored files, a step's files in /tmp or the
  // workspace) counts against memory_mb for the rest of the run. RunTeardown removes it
  // after the tmpfs charged to it is unmounted.
  // A sandbox of the warm pool, started ahead with its directory and cgroup, when the run
  // fits one and one is ready (warm_start.cc); else both are made now (MakeRunDir) and the
  // sandbox starts cold. Released after the response is sent (RunEnd::after_send):
  // the run's tmpfs is unmounted and its cgroup removed off the client's clock.
  std::unique_ptr<WarmSandbox> warm = TakeWarmSandbox(run, session.held(), id);
  std::shared_ptr<RunTeardown> teardown;
  if (warm) {
    teardown = warm->teardown;
    util::StampPhase("warm_taken");
  } else {
    auto made = MakeRunDir(run, id);
    if (!made.ok()) {
      return Refused(Refuse(RefusalCode::kSandboxError, "run " + id + ": " + made.error().message));
    }
    teardown = std::move(*made);
    util::StampPhase("run_dir");
  }
  const RunPaths paths = teardown->dir.paths();
  // The files the run starts with: exported again only when the run touches them.
  storage::FileStamps before;
  if (auto refused = FillWorkspace(run, session, paths, id, teardown->cgroup.get(), &before)) {
    return Refused(std::move(*refused));
  }
  util::StampPhase("files_placed");
  const bool zygote = !warm && ZygoteShapeFits(run, session.held());
  auto ran = RunSteps(run, id, paths, teardown->cgroup.get(), warm ? warm->sandbox.get() : nullptr,
                      zygote);
  if (!ran.ok()) {
    RunEnd end =
        Refused(Refuse(RefusalCode::kSandboxError, "run " + id + ": " + ran.error().message));
    end.sandbox_error = true;
    return end;
  }
  RunResponse& response = *ran;
  if (preamble.plan && response.steps) {
    MarkBlocksNotRun(run.steps, *response.steps, response.status, &*preamble.plan);
  }
  response.plan = std::move(preamble.plan);
  response.session_restarted = preamble.session_restarted;
  response.environment = std::move(preamble.environment);
  RunEnd end = ExportAndSave(run, live, paths.workspace, paths.outputs, &before, session, response);
  warm.reset();  // reaped by now: its directory and cgroup go after the response
  end.after_send = std::move(teardown);
  return end;
}

Result<std::shared_ptr<RunTeardown>> Engine::MakeRunDir(const RunRequest& run,
                                                        const std::string& id) const {
  // The run's one cgroup, for the session's restore and then every step:
  // what one of them leaves charged (the restored files, a step's files in /tmp or the
  // workspace) counts against memory_mb for the rest of the run. RunTeardown removes it
  // after the tmpfs charged to it is unmounted.
  auto cgroup = runner_->CreateCgroup(id, CgroupLimitsFor(config_, run.limits, SandboxUse::kStep));
  if (!cgroup.ok()) return cgroup.error();
  auto teardown =
      std::make_shared<RunTeardown>(std::move(*cgroup), config_.runs_dir + "/" + id, run_tmpfs_);
  // Installed packages land in the workspace (~/.local): room for them on top of disk_mb.
  const bool installs = std::any_of(run.steps.begin(), run.steps.end(), IsInstallStep);
  const int64_t disk_mb = run.limits.disk_mb + (installs ? config_.install_disk_mb : 0);
  if (Status s = teardown->dir.Create(static_cast<uint64_t>(disk_mb) << 20,
                                      static_cast<uid_t>(config_.sandbox_uid),
                                      static_cast<gid_t>(config_.sandbox_gid));
      !s.ok()) {
    return s.error();
  }
  return teardown;
}

std::optional<Refusal> Engine::FillWorkspace(const RunRequest& run,
                                             const storage::SessionLock& session,
                                             const RunPaths& paths, const std::string& id,
                                             sandbox::RunCgroup* cgroup,
                                             storage::FileStamps* before) const {
  PlaceFontCache(paths.tmp);
  if (session.held()) {
    if (auto refused = RestoreSession(session, paths.workspace, id, run.limits, cgroup, before)) {
      return refused;
    }
  }
  if (auto refused = PlaceRunFiles(run, paths.workspace, before)) return refused;
  // Every program file is written now, before any user code runs: once the run has started,
  // the workspace is the user's (it could plant symlinks), and the daemon writes nothing
  // more into it (red-team finding: a path written between steps followed a planted link).
  if (Status s = WriteProgramFiles(run, paths.workspace, support_bytecode_); !s.ok()) {
    return Refuse(RefusalCode::kSandboxError, "run " + id + ": " + s.error().message);
  }
  return std::nullopt;
}

std::optional<Refusal> Engine::PlaceRunFiles(const RunRequest& run, const std::string& workspace,
                                             storage::FileStamps* stamps) const {
  const uid_t uid = static_cast<uid_t>(config_.sandbox_uid);
  const gid_t gid = static_cast<gid_t>(config_.sandbox_gid);
  for (const auto& file : run.files) {
    if (Status s = storage::PlaceFile(workspace, file.path, file.content, uid, gid); !s.ok()) {
      return RefuseError(s.error(), "files");
    }
  }
  // Blocks the plan saves under a name (app.py, run by a later "python app.py") are
  // written first, like input files: not exported again unless the run changes them.
  for (size_t i : PartitionSteps(run.steps).files) {
    const CodeStep& saved = run.steps[i];
    if (Status s = storage::PlaceFile(workspace, saved.save_as, saved.code, uid, gid); !s.ok()) {
      return RefuseError(s.error(), "markdown");
    }
  }
  // What the run starts with, whoever put it there; a file whose stamp is the same at export
  // was not touched by the run and gets no new link (storage::FileStamp says why a program
  // cannot fake that).
  auto found = storage::StampWorkspace(workspace, storage::ExportOptions{});
  if (!found.ok()) return Refuse(RefusalCode::kStorage, found.error().message);
  stamps->clear();
  int64_t latest_ns = 0;
  for (const auto& [path, stamp] : *found) {
    (*stamps)[path] = storage::EncodeStamp(stamp);
    latest_ns = std::max({latest_ns, stamp.ctime_ns, stamp.mtime_ns});
  }
  storage::WaitPastTimestamp(latest_ns);
  return std::nullopt;
}

Result<RunResponse> Engine::RunSteps(const RunRequest& run, const std::string& id,
                                     const RunPaths& paths, sandbox::RunCgroup* cgroup,
                                     sandbox::WaitingSandbox* warm, bool zygote) const {
  RunResponse response;
  response.id = id;
  response.status = RunStatus::kOk;
  response.limits = run.limits;
  if (MultiStep(run)) response.steps.emplace();
  const std::vector<size_t> programs = PartitionSteps(run.steps).programs;
  int64_t program_ms = 0;  // wall time of the program steps (install steps have their own)
  uint64_t output_used = 0;
  for (size_t i : programs) {
    const CodeStep& step = run.steps[i];
    // An install step whose packages the run's prepared environment holds is not run.
    if (auto satisfied = IsInstallStep(step) ? SatisfiedByEnvironment(run, step, StepIndex(step, i))
                                             : std::nullopt) {
      StepEvents events(run.events, satisfied->index, satisfied->language);
      events.OnOutput(1, satisfied->stdout_stream.text);
      events.End(RunStatusName(satisfied->status), satisfied->exit_code);
      response.stdout_stream.text += satisfied->stdout_stream.text;
      if (response.steps) response.steps->push_back(std::move(*satisfied));
      continue;
    }
    const StepBudget budget = BudgetLeft(config_, run, step, program_ms, output_used);
    if (const std::string spent = BudgetSpent(budget); !spent.empty()) {
      response.status = budget.wall_ms <= 0 ? RunStatus::kTimeout : RunStatus::kOutputLimit;
      AppendLine(response.stderr_stream.text,
                 "sandrun: " + step.title + " not run: the run's " + spent + " budget is spent");
      break;
    }
    StepEvents events(run.events, StepIndex(step, i), step.language->name);
    sandbox::SandboxSpec spec = StepSpec(config_, run, i, id, paths, budget);
    spec.observer = events.observer();
    auto ran = RunStep(run, i, spec, cgroup, warm, zygote);
    if (!ran.ok()) return ran.error();
    events.End(RunStatusName(ran->step.status), ran->step.exit_code);
    if (!IsInstallStep(step)) program_ms += ran->step.wall_ms;
    output_used += ran->output_bytes;
    const bool failed = ran->step.status != RunStatus::kOk;
    JoinStep(std::move(*ran), programs.size() > 1, step.title, &response);
    if (failed && !run.continue_on_error) break;
  }
  return response;
}

Result<StepRun> Engine::RunStep(const RunRequest& run, size_t i, const sandbox::SandboxSpec& spec,
                                sandbox::RunCgroup* cgroup, sandbox::WaitingSandbox* warm,
                                bool zygote) const {
  // Steps run one after the other in the run's cgroup; each one's outcome is its own. The
  // warm pool's sandbox (when the run took one) serves its one program step.
  const bool warm_start = warm != nullptr && !warm->used();
  sandbox::SandboxSpec from_zygote;
  if (zygote && !warm_start && !IsInstallStep(run.steps[i])) {
    from_zygote = spec;
    from_zygote.zygote = sandbox::ZygoteKind::kRun;
  }
  const bool zygote_start = from_zygote.zygote != sandbox::ZygoteKind::kNone;
  auto result = warm_start ? runner_->RunWaiting(*warm, WarmStartLine(spec), spec)
                           : runner_->Run(zygote_start ? from_zygote : spec, cgroup);
  // A pooled sandbox that ended while waiting is not the run's failure: start cold, in the
  // same directory and cgroup.
  if (warm_start && !result.ok() && !warm->used()) result = runner_->Run(spec, cgroup);
  if (!result.ok()) return result.error();
  StepRun ran = DescribeStep(config_, run, i, *result);
  ran.step.stderr_stream.text = NameStepFile(run, i, ran.step.stderr_stream.text);
  if (std::string note = DiskFullNote(run, spec.workspace_dir); !note.empty()) {
    AppendLine(ran.step.stderr_stream.text, note);
  }
  if (std::string note = NoInputNote(run, i, ran.step.stderr_stream.text); !note.empty()) {
    AppendLine(ran.step.stderr_stream.text, note);
  }
  return ran;
}

storage::PublishOptions Engine::MakePublishOptions(const RunRequest& run,
                                                   const config::Config& live) const {
  storage::PublishOptions publish;
  publish.artifacts_root = config_.artifacts_dir;
  publish.public_base_url = run.public_base_url;
  publish.link_secret = config_.link_secret;
  // Behind a front nginx, links carry the node that serves them (docs/CLUSTER.md).
  if (!config_.node_id.empty()) publish.url_prefix = "/files/" + config_.node_id;
  publish.user_dir_key = config_.link_secret + ":user-dir";
  publish.link_ttl_s = live.link_ttl_s;
  publish.max_age_s = config_.artifact_max_age_s;
  publish.quota = {static_cast<uint64_t>(live.user_quota_files),
                   static_cast<uint64_t>(live.user_quota_mb) << 20};
  // The user's sessions share the quota and are never evicted for a run's files.
  publish.reserved = sessions_.UserUsage(run.user);
  return publish;
}

RunEnd Engine::ExportAndSave(const RunRequest& run, const config::Config& live,
                             const std::string& workspace, const std::string& outputs_dir,
                             storage::FileStamps* stamps, const storage::SessionLock& session,
                             RunResponse& response) {
  const config::Limits& limits = run.limits;
  storage::ExportOptions export_options;
  export_options.max_files = static_cast<int>(limits.max_files);
  // A file of file_size_mb is whole; a larger one was cut by RLIMIT_FSIZE, set a block above
  // it (sandbox::RlimitFsizeBytes), and is skipped as too_large.
  export_options.max_file_bytes = static_cast<uint64_t>(limits.file_size_mb) << 20;
  // What the program showed; a saved file it showed is exported even when untouched.
  std::string displays_note;
  const DisplayManifest manifest = outputs_dir.empty()
                                       ? DisplayManifest{}
                                       : ReadDisplayManifest(outputs_dir, config_, &displays_note);
  if (!displays_note.empty()) AppendLine(response.stderr_stream.text, displays_note);
  for (const auto& shown : WorkspaceFileNames(manifest)) stamps->erase(shown);
  for (const auto& [path, encoded] : *stamps) {
    if (auto stamp = storage::DecodeStamp(encoded)) export_options.untouched[path] = *stamp;
  }
  auto walk = storage::WalkWorkspace(workspace, export_options);
  util::StampPhase("export_walked");
  uint64_t skipped_unlisted = 0;
  if (walk.ok()) {
    response.files_skipped = std::move(walk->skipped);
    skipped_unlisted = walk->skipped_unlisted;
    PublishFiles(run, live, workspace, outputs_dir, manifest, walk->files,
                 export_options.max_file_bytes, response);
  } else {
    AppendLine(response.stderr_stream.text,
               "sandrun: generated files could not be listed: " + walk.error().message);
  }
  const storage::Quota quota = {static_cast<uint64_t>(live.user_quota_files),
                                static_cast<uint64_t>(live.user_quota_mb) << 20};
  if (session.held()) SaveSession(sessions_, session, workspace, quota, response);
  CapSkipped(skipped_unlisted, response);
  RunEnd end;
  end.response = std::move(response);
  end.finished = true;
  return end;
}

void Engine::PublishFiles(const RunRequest& run, const config::Config& live,
                          const std::string& workspace, const std::string& outputs_dir,
                          const DisplayManifest& manifest,
                          const std::vector<storage::FoundFile>& found, uint64_t max_file_bytes,
                          RunResponse& response) {
  const storage::PublishOptions publish = MakePublishOptions(run, live);
  std::map<std::string, std::string> output_paths;
  const storage::ExtraSource outputs = PlanOutputFiles(outputs_dir, manifest, found, max_file_bytes,
                                                       &output_paths, &response.files_skipped);
  for (const auto& s : manifest.skipped) response.files_skipped.push_back(s);
  auto published = storage::Publish(workspace, found, outputs, run.user, response.id, publish);
  util::StampPhase("published");
  if (!published.ok()) {
    // Disk full or a write error in the store: nothing of the run was published.
    response.status = RunStatus::kFileLimit;
    AppendLine(response.stderr_stream.text,
               "sandrun: generated files could not be saved, none were published: " +
                   published.error().message);
    return;
  }
  // A kernel's shown figures (PublishDisplays) are there already: the workspace's files
  // follow them.
  response.files.insert(response.files.end(), std::make_move_iterator(published->files.begin()),
                        std::make_move_iterator(published->files.end()));
  // A stateful run's displays come from its kernel (StatefulRun), not a manifest.
  if (!outputs_dir.empty()) {
    response.displays = AssembleDisplays(manifest, output_paths, response.files);
  }
  for (auto& s : published->skipped) response.files_skipped.push_back(std::move(s));
  if (published->over_quota) {
    response.status = RunStatus::kFileLimit;
    std::string note = storage::DescribeOverQuota(published->requested, publish.quota);
    if (publish.reserved.files > 0 || publish.reserved.bytes > 0) {
      note += " (the user's sessions hold " + std::to_string(publish.reserved.files) +
              " files and directories, " + std::to_string(publish.reserved.bytes) +
              " bytes on disk, of that quota)";
    }
    AppendLine(response.stderr_stream.text, "sandrun: " + note);
  }
}

void Engine::SetPreparedCaches(std::string font_cache_name, std::string font_cache,
                               std::vector<SupportBytecode> bytecode) {
  font_cache_name_ = std::move(font_cache_name);
  font_cache_ = std::move(font_cache);
  support_bytecode_ = std::move(bytecode);
}

void Engine::PlaceFontCache(const std::string& tmp) const {
  if (font_cache_name_.empty()) return;
  // Best effort: without it matplotlib builds its own (0.3 s), nothing fails.
  (void)storage::PlaceFile(tmp, "matplotlib/" + font_cache_name_, font_cache_,
                           static_cast<uid_t>(config_.sandbox_uid),
                           static_cast<gid_t>(config_.sandbox_gid));
}

}  // namespace sandrun::run
