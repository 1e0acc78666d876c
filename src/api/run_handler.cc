// POST /run: decode -> admission -> workspace (session, input files) -> steps in the
// sandbox -> export and publish -> JSON. Service::HandleRun is the only entry.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "api/access.h"
#include "api/environments.h"
#include "api/packages.h"
#include "api/run_codec.h"
#include "api/run_displays.h"
#include "api/service.h"
#include "api/session_continuity.h"
#include "python/support_files.h"
#include "storage/artifact_store.h"
#include "storage/digest.h"
#include "storage/export.h"
#include "storage/session_restore.h"
#include "storage/workspace_file.h"
#include "sys/syscalls.h"
#include "util/phases.h"
#include "util/reserved_dirs.h"
#include "util/text.h"

namespace sandrun::api {
namespace {

constexpr char kProgramDir[] = "/home/user/.sandrun";

// Directory of one run on the host: one size-limited tmpfs (so hard links to outside inodes
// fail with EXDEV and a disk-filling loop hits ENOSPC, not the host's disk) holding the
// workspace and the run's /tmp, and an empty directory for the new root. Removed whole.
class RunDir {
 public:
  explicit RunDir(std::string path) : path_(std::move(path)) {}
  ~RunDir() {
    if (mounted_) (void)sys::Unmount(path_ + "/fs");
    (void)sys::RemoveTree(path_);
  }
  Status Create(uint64_t disk_bytes, uid_t uid, gid_t gid) {
    Status s = sys::MakeDirs(path_ + "/fs", 0755);
    if (s.ok()) s = sys::MakeDirs(root(), 0755);
    if (s.ok()) s = sys::MountTmpfs(path_ + "/fs", disk_bytes, 0, 0, 0755);
    mounted_ = s.ok();
    if (s.ok()) s = MakeOwnedDir(workspace(), 0755, uid, gid);
    if (s.ok()) s = MakeOwnedDir(tmp(), 01777, uid, gid);
    // The sandbox user's (not host root's, which shows as nobody:nogroup in `ls -la`); it
    // still cannot change it: it is bound read-only at both names of the workspace (mounts.cc).
    if (s.ok()) s = MakeOwnedDir(workspace() + "/.sandrun", 0755, uid, gid);
    // Shown figures land here, on the run's tmpfs but outside the workspace (issue 14).
    if (s.ok()) s = MakeOwnedDir(outputs(), 0755, uid, gid);
    return s;
  }
  std::string workspace() const { return path_ + "/fs/ws"; }
  std::string outputs() const { return path_ + "/fs/out"; }
  std::string tmp() const { return path_ + "/fs/tmp"; }
  std::string root() const { return path_ + "/root"; }

 private:
  static Status MakeOwnedDir(const std::string& path, int mode, uid_t uid, gid_t gid) {
    if (::mkdir(path.c_str(), 0700) != 0) return sys::ErrnoError("sandbox_error", "mkdir " + path);
    if (::chown(path.c_str(), uid, gid) != 0 || ::chmod(path.c_str(), mode) != 0) {
      return sys::ErrnoError("sandbox_error", "chown/chmod " + path);
    }
    return OkStatus();
  }
  std::string path_;
  bool mounted_ = false;
};

// What a stateless run leaves to clean up, in the order it must go: the tmpfs charged to the
// cgroup first (members are destroyed in reverse order), then the cgroup.
struct RunTeardown {
  RunTeardown(std::unique_ptr<sandbox::RunCgroup> c, std::string dir_path)
      : cgroup(std::move(c)), dir(std::move(dir_path)) {}
  std::unique_ptr<sandbox::RunCgroup> cgroup;  // null without cgroups
  RunDir dir;
};

}  // namespace

std::vector<std::string> SandboxEnv(const config::Config& config) {
  std::vector<std::string> env = {
      "HOME=/home/user",
      "USER=user",
      "LOGNAME=user",
      "LANG=C.UTF-8",
      "LC_ALL=C.UTF-8",
      "PATH=/home/user/.local/bin:/usr/local/bin:/usr/bin:/bin",
      "PYTHONUNBUFFERED=1",
      // The program file lives in .sandrun/; modules the code writes beside it in the
      // workspace (helper.py) must import as if the program ran from there.
      "PYTHONPATH=" + std::string(python::kSupportDir) + ":/home/user",
      "PYTHONIOENCODING=utf-8",
      "PYTHONDONTWRITEBYTECODE=1",
      "MPLBACKEND=Agg",
      "MPLCONFIGDIR=/tmp/matplotlib",
      "XDG_CACHE_HOME=/home/user/.cache",
      "TMPDIR=/tmp",
      // pip as users type it: user-site installs, Debian's PEP 668 refusal lifted inside
      // the sandbox only, and a fast failure without network (no retries, short timeout).
      "PIP_USER=1",
      "PIP_BREAK_SYSTEM_PACKAGES=1",
      "PIP_DISABLE_PIP_VERSION_CHECK=1",
      "PIP_NO_INPUT=1",
      "PIP_RETRIES=0",
      "PIP_TIMEOUT=3",
      "PIP_CACHE_DIR=/home/user/.cache/pip",
  };
  if (!config.timezone.empty()) env.push_back("TZ=" + config.timezone);
  for (std::string& pip : PipEnv(config)) env.push_back(std::move(pip));
  return env;
}

namespace {

RunStatus StatusOf(const sandbox::SandboxResult& r) {
  using sandbox::RunOutcome;
  switch (r.outcome) {
    case RunOutcome::kExited:
      return r.exit_code == 0 ? RunStatus::kOk : RunStatus::kError;
    case RunOutcome::kSignaled:
      return RunStatus::kKilled;
    case RunOutcome::kWallTimeout:
    case RunOutcome::kCpuTimeout:
      return RunStatus::kTimeout;
    case RunOutcome::kMemoryLimit:
      return RunStatus::kMemoryLimit;
    case RunOutcome::kOutputLimit:
      return RunStatus::kOutputLimit;
  }
  return RunStatus::kError;
}

// A line appended to stderr saying which limit stopped the run, so neither the user nor the
// model has to guess from a bare SIGKILL.
std::string LimitNote(const sandbox::SandboxResult& r, const config::Limits& limits) {
  using sandbox::RunOutcome;
  switch (r.outcome) {
    case RunOutcome::kWallTimeout:
      return "sandrun: stopped: wall-clock time limit of " + std::to_string(limits.wall_time_s) +
             " s reached";
    case RunOutcome::kCpuTimeout:
      return "sandrun: stopped: CPU time limit of " + std::to_string(limits.cpu_time_s) +
             " s reached";
    case RunOutcome::kMemoryLimit:
      // The OOM killer picks one process; when that was a child and the program carried on
      // to exit by itself, nothing was "stopped".
      if (r.exit_code >= 0) {
        return "sandrun: a process was killed by the memory limit of " +
               std::to_string(limits.memory_mb) +
               " MiB (the program went on and exited with code " + std::to_string(r.exit_code) +
               ")";
      }
      return "sandrun: stopped: memory limit of " + std::to_string(limits.memory_mb) +
             " MiB reached";
    case RunOutcome::kOutputLimit:
      return "sandrun: stopped: output limit exceeded (" + std::to_string(limits.output_bytes) +
             " bytes of stdout + stderr)";
    default:
      return "";
  }
}

void AppendLine(std::string& text, const std::string& line) {
  if (!text.empty() && text.back() != '\n') text.push_back('\n');
  text += line + "\n";
}

std::string Sha256Hex(const std::string& data) {
  storage::Sha256 sha;
  sha.Update(data.data(), data.size());
  return sha.FinalHex();
}

// An install step (pip install ..., and nothing else) runs on its own budget
// (install_wall_time_s, install_disk_mb), not the program's (issue 9 part 2). The planner's
// install steps are held to the same rule: a block that also runs something is a program.
bool IsInstallStep(const CodeStep& step) {
  return step.language != nullptr && step.language->name == "bash" && IsInstallOnlyCode(step.code);
}

// A shell step with a pip install in it, install step or not: when pip finds nothing
// without the network, it gets the network-off note.
bool MentionsInstall(const CodeStep& step) {
  return step.language != nullptr && step.language->name == "bash" && IsInstallCode(step.code);
}

// Several programs (snippets, markdown) each get their own directory in .sandrun.
bool MultiStep(const RunRequest& run) { return run.markdown.has_value() || run.steps.size() > 1; }

// The program file of step `i`, relative to .sandrun: main.py, or <i>/main.py.
std::string ProgramPath(const RunRequest& run, size_t i) {
  const std::string& name = run.steps[i].language->file_name;
  return MultiStep(run) ? std::to_string(i) + "/" + name : name;
}

// Writes every program file of the run into <workspace>/.sandrun (the daemon's own directory,
// made by RunDir::Create; nothing of the user's is in it yet).
Status WriteProgramFiles(const RunRequest& run, const std::string& workspace) {
  // The notebook support files (sitecustomize.py, the loader): for every run, since a shell
  // step can start Python too.
  const std::string support = workspace + "/" + python::kSupportDirInWorkspace;
  if (Status s = sys::MakeDirs(support, 0755); !s.ok()) return s;
  for (const auto& file : python::SupportFiles()) {
    if (Status s = sys::WriteFile(support + "/" + file.name, std::string(file.content), 0644);
        !s.ok()) {
      return s;
    }
  }
  for (size_t i = 0; i < run.steps.size(); ++i) {
    if (!run.steps[i].save_as.empty()) continue;
    if (MultiStep(run)) {
      if (Status s =
              sys::MakeDirs(workspace + "/" + util::kProgramDir + "/" + std::to_string(i), 0755);
          !s.ok()) {
        return s;
      }
    }
    const std::string path = workspace + "/" + util::kProgramDir + "/" + ProgramPath(run, i);
    if (Status s = sys::WriteFile(path, run.steps[i].code, 0644); !s.ok()) return s;
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
    const std::string why = s.error().code == "over_budget"
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

HttpResponse Refusal(const ApiError& err) {
  return ErrorResponse(err.status, err.code, err.message, err.field);
}

HttpResponse SessionBusy(const std::string& session, const std::string& why) {
  HttpResponse r = ErrorResponse(
      409, "session_busy", "session '" + util::SanitizeUtf8(session) + "': " + why, "session");
  r.headers["Retry-After"] = "5";
  return r;
}

// 503 for runs that arrive while the daemon stops (SIGTERM): the runs in flight finish.
HttpResponse StoppingResponse() {
  HttpResponse r = ErrorResponse(503, "stopping", "sandrun is stopping; retry shortly");
  r.headers["Retry-After"] = "5";
  return r;
}

}  // namespace

std::optional<HttpResponse> Service::LockSession(const RunRequest& run,
                                                 storage::SessionLock* lock) {
  // Free: taken without waiting, and without a place among the waiters.
  auto locked = sessions_.Lock(run.user, run.session, std::chrono::milliseconds(0));
  if (!locked.ok() && locked.error().code == "session_busy") {
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
    if (locked.error().code == "session_busy") {
      return SessionBusy(run.session, locked.error().message);
    }
    return ErrorResponse(500, "storage", locked.error().message);
  }
  *lock = std::move(*locked);
  return std::nullopt;
}

std::optional<HttpResponse> Service::RestoreSession(
    const storage::SessionLock& session, const std::string& workspace, const std::string& id,
    const config::Limits& limits, sandbox::RunCgroup* cgroup, storage::FileDigests* digests) const {
  // Copied by a helper process in the run's own cgroup, so the workspace's tmpfs pages are
  // charged to the run, not to the daemon, and stay charged there while the run's programs
  // run in the same cgroup (issue 10 item 4).
  std::vector<std::string> argv = {"/proc/self/exe", "restore-session"};
  for (auto& arg :
       storage::RestoreHelperArgs(session.dir(), workspace, static_cast<uid_t>(config_.sandbox_uid),
                                  static_cast<gid_t>(config_.sandbox_gid))) {
    argv.push_back(std::move(arg));
  }
  auto helper = runner_->RunHelper(argv, cgroup);
  if (!helper.ok()) {
    return ErrorResponse(500, "sandbox_error", "run " + id + ": " + helper.error().message);
  }
  const int ws = helper->wait_status;
  if (helper->memory_limit || (WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL)) {
    return ErrorResponse(400, "memory_limit",
                         "the session's files do not fit in this run's memory limit (memory_mb " +
                             std::to_string(limits.memory_mb) +
                             "): a session's workspace is held in memory; raise memory_mb",
                         "limits.memory_mb");
  }
  const int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
  const std::string message = util::SanitizeUtf8(helper->stderr_text);
  if (code == storage::kRestoreFileLimit) {
    return ErrorResponse(400, "file_limit",
                         "the session's files do not fit in this run's workspace (disk_mb " +
                             std::to_string(limits.disk_mb) + "): " + message,
                         "limits.disk_mb");
  }
  if (code != storage::kRestoreOk) {
    return ErrorResponse(500, "storage", "run " + id + ": session restore: " + message);
  }
  auto decoded = storage::DecodeDigests(helper->stdout_text);
  if (!decoded.ok()) return ErrorResponse(500, "storage", decoded.error().message);
  *digests = std::move(*decoded);
  return std::nullopt;
}

HttpResponse Service::HandleRun(const HttpRequest& request, bool trusted) {
  // The live keys (tokens, limits, quotas) as of now, for the whole request (SIGHUP).
  const std::shared_ptr<const config::Config> live = LiveConfig();
  // A web page's request first: whatever else it carries, its origin must be allowed.
  if (auto err = CheckOrigin(request.Header("origin"), live->origins)) return Refusal(*err);
  const Caller caller = Authenticate(request.Header("authorization"), *live);
  if (!trusted && !caller.authenticated) {
    HttpResponse r = ErrorResponse(401, "unauthorized",
                                   "missing or wrong bearer token (Authorization: Bearer <token>)");
    r.headers["WWW-Authenticate"] = "Bearer";
    return r;
  }
  if (auto err = CheckContentType(request.Header("content-type"))) return Refusal(*err);
  if (runner_ == nullptr || !health_error_.empty()) {
    return ErrorResponse(503, "unavailable", "this host cannot run sandboxes: " + health_error_);
  }
  if (draining_) return StoppingResponse();
  RunRequest run;
  if (auto err = DecodeRunRequest(request.body, request.Header("x-sandrun-user"),
                                  request.Header("x-sandrun-session"), *live, &run)) {
    return Refusal(*err);
  }
  if (auto err = ApplyTokenBinding(caller, &run)) return Refusal(*err);
  bool session_seen = false;
  if (auto err = DecodeSessionSeen(request.Header("x-sandrun-session-seen"), &session_seen)) {
    return Refusal(*err);
  }
  Notes().user = run.user;
  util::StampPhase("decoded");
  std::optional<std::vector<PlanEntry>> plan;
  if (run.markdown) {
    if (auto err = PlanMarkdown(*run.markdown, run.block, &run.steps, &plan)) {
      return ErrorResponse(err->status, err->code, err->message, err->field);
    }
  } else {
    SplitCodePipLines(&run);
  }
  // The prepared environment (`packages`), before the session and a sandbox slot: its build
  // may take long and holds neither.
  storage::EnvironmentStore::Lease environment_lease;
  std::optional<EnvironmentReport> environment;
  if (auto answer = PrepareEnvironment(&run, *live, &environment_lease, &environment)) {
    return *answer;
  }
  // The session first: a run waiting for its session's previous run must not hold a
  // sandbox slot meanwhile (others would get 503 while nothing runs).
  storage::SessionLock session;
  if (!run.session.empty()) {
    if (auto refused = LockSession(run, &session)) return *refused;
  }
  const auto queued_at = std::chrono::steady_clock::now();
  Admission::Ticket ticket = admission_.Acquire();
  Notes().queue_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::steady_clock::now() - queued_at)
                         .count();
  if (!ticket.admitted()) {
    HttpResponse r = ErrorResponse(503, "busy", "all sandboxes are busy; retry shortly");
    r.headers["Retry-After"] = "5";
    return r;
  }
  // Waited in the queue or for the session while the daemon began to stop.
  if (draining_) return StoppingResponse();
  util::StampPhase("admitted");

  const std::string id = util::RandomHex(16);
  const config::Limits& limits = run.limits;
  const uid_t uid = static_cast<uid_t>(config_.sandbox_uid);
  const gid_t gid = static_cast<gid_t>(config_.sandbox_gid);
  if (run.stateful) return HandleStatefulRun(request, run, *live, std::move(plan), session, id);
  // A stateless run changes the session's files under its kernel: the kernel ends.
  if (session.held())
    kernels_.End(KernelKey(run), "a stateless run of the session changed its files");
  // The run's one cgroup, for the session's restore and then every step (issue 10 item 4):
  // what one of them leaves charged (the restored files, a step's files in /tmp or the
  // workspace) counts against memory_mb for the rest of the run. Declared before the RunDir
  // so it is removed after the tmpfs charged to it is unmounted.
  sandbox::CgroupLimits cgroup_limits;
  cgroup_limits.memory_bytes = static_cast<uint64_t>(limits.memory_mb) << 20;
  cgroup_limits.processes = limits.processes;
  auto cgroup = runner_->CreateCgroup(id, cgroup_limits);
  if (!cgroup.ok()) {
    return ErrorResponse(500, "sandbox_error", "run " + id + ": " + cgroup.error().message);
  }
  // Released after the response is sent (HttpResponse::after_send): the run's tmpfs is
  // unmounted and its cgroup removed off the client's clock.
  auto teardown = std::make_shared<RunTeardown>(std::move(*cgroup), config_.runs_dir + "/" + id);
  RunDir& dir = teardown->dir;
  // Installed packages land in the workspace (~/.local): room for them on top of disk_mb.
  const bool installs = std::any_of(run.steps.begin(), run.steps.end(), IsInstallStep);
  const int64_t disk_mb = limits.disk_mb + (installs ? config_.install_disk_mb : 0);
  if (Status s = dir.Create(static_cast<uint64_t>(disk_mb) << 20, uid, gid); !s.ok()) {
    return ErrorResponse(500, "sandbox_error", "run " + id + ": " + s.error().message);
  }
  util::StampPhase("run_dir");

  // matplotlib's font cache, built at start-up (font_cache.cc), in the run's MPLCONFIGDIR.
  if (!font_cache_name_.empty()) {
    (void)storage::PlaceFile(dir.tmp(), "matplotlib/" + font_cache_name_, font_cache_, uid, gid);
  }

  // The files the run starts with: exported again only when changed.
  storage::FileDigests before;
  if (session.held()) {
    if (auto refused =
            RestoreSession(session, dir.workspace(), id, limits, teardown->cgroup.get(), &before)) {
      return *refused;
    }
  }
  for (const auto& file : run.files) {
    if (Status s = storage::PlaceFile(dir.workspace(), file.path, file.content, uid, gid);
        !s.ok()) {
      return ErrorResponse(400, s.error().code, s.error().message, "files");
    }
    before[file.path] = Sha256Hex(file.content);
  }

  // Blocks the plan saves under a name (app.py, run by a later "python app.py") are
  // written first, like input files: not exported again unless the run changes them.
  for (const auto& step : run.steps) {
    if (step.save_as.empty()) continue;
    if (Status s = storage::PlaceFile(dir.workspace(), step.save_as, step.code, uid, gid);
        !s.ok()) {
      return ErrorResponse(400, s.error().code, s.error().message, "markdown");
    }
    before[step.save_as] = Sha256Hex(step.code);
  }

  // Every program file is written now, before any user code runs: once the run has started,
  // the workspace is the user's (it could plant symlinks), and the daemon writes nothing
  // more into it (red-team finding: a path written between steps followed a planted link).
  if (Status s = WriteProgramFiles(run, dir.workspace()); !s.ok()) {
    return ErrorResponse(500, "sandbox_error", "run " + id + ": " + s.error().message);
  }

  util::StampPhase("files_placed");
  auto ran = RunSteps(run, id, dir.workspace(), dir.tmp(), dir.root(), dir.outputs(),
                      teardown->cgroup.get());
  if (!ran.ok()) {
    CountSandboxError();
    return ErrorResponse(500, "sandbox_error", "run " + id + ": " + ran.error().message);
  }
  RunResponse& response = *ran;
  if (plan && response.steps) {
    MarkBlocksNotRun(run.steps, *response.steps, response.status, &*plan);
  }
  response.plan = std::move(plan);
  if (session.held())
    response.session_restarted = SessionRestarted(session_seen, session.created());
  response.environment = std::move(environment);

  HttpResponse http = ExportAndRespond(request, run, *live, dir.workspace(), dir.outputs(), &before,
                                       session, response);
  http.after_send = std::move(teardown);
  return http;
}

storage::PublishOptions Service::MakePublishOptions(const HttpRequest& request,
                                                    const RunRequest& run,
                                                    const config::Config& live) const {
  storage::PublishOptions publish;
  publish.artifacts_root = config_.artifacts_dir;
  publish.public_base_url = PublicBaseUrl(request);
  publish.link_secret = config_.link_secret;
  // Behind a front nginx, links carry the node that serves them (README "More than one machine").
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

HttpResponse Service::ExportAndRespond(const HttpRequest& request, const RunRequest& run,
                                       const config::Config& live, const std::string& workspace,
                                       const std::string& outputs_dir,
                                       storage::FileDigests* digests,
                                       const storage::SessionLock& session, RunResponse& response) {
  const config::Limits& limits = run.limits;
  const std::string& id = response.id;
  storage::FileDigests& before = *digests;
  storage::ExportOptions export_options;
  export_options.max_files = static_cast<int>(limits.max_files);
  // A file as large as RLIMIT_FSIZE was most likely cut short by it: treat as too large.
  export_options.max_file_bytes = (static_cast<uint64_t>(limits.file_size_mb) << 20) - 1;
  // What the program showed; a saved file it showed is exported even when unchanged.
  std::string displays_note;
  const DisplayManifest manifest = outputs_dir.empty()
                                       ? DisplayManifest{}
                                       : ReadDisplayManifest(outputs_dir, config_, &displays_note);
  if (!displays_note.empty()) AppendLine(response.stderr_stream.text, displays_note);
  for (const auto& shown : WorkspaceFileNames(manifest)) before.erase(shown);
  export_options.unchanged_inputs.assign(before.begin(), before.end());
  auto walk = storage::WalkWorkspace(workspace, export_options);
  util::StampPhase("export_walked");
  uint64_t skipped_unlisted = 0;
  const storage::Quota quota = {static_cast<uint64_t>(live.user_quota_files),
                                static_cast<uint64_t>(live.user_quota_mb) << 20};
  if (walk.ok()) {
    response.files_skipped = std::move(walk->skipped);
    skipped_unlisted = walk->skipped_unlisted;
    const storage::PublishOptions publish = MakePublishOptions(request, run, live);
    std::map<std::string, std::string> output_paths;
    const storage::ExtraSource outputs =
        PlanOutputFiles(outputs_dir, manifest, walk->files, export_options.max_file_bytes,
                        &output_paths, &response.files_skipped);
    for (const auto& s : manifest.skipped) response.files_skipped.push_back(s);
    auto published = storage::Publish(workspace, walk->files, outputs, run.user, id, publish);
    util::StampPhase("published");
    if (published.ok()) {
      response.files = std::move(published->files);
      // A stateful run's displays come from its kernel (HandleStatefulRun), not a manifest.
      if (!outputs_dir.empty()) {
        response.displays = AssembleDisplays(manifest, output_paths, response.files);
      }
      for (const auto& f : response.files) (*digests)[f.path] = f.sha256;
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
    } else {
      // Disk full or a write error in the store: nothing of the run was published.
      response.status = RunStatus::kFileLimit;
      AppendLine(response.stderr_stream.text,
                 "sandrun: generated files could not be saved, none were published: " +
                     published.error().message);
    }
  } else {
    AppendLine(response.stderr_stream.text,
               "sandrun: generated files could not be listed: " + walk.error().message);
  }
  if (session.held()) SaveSession(sessions_, session, workspace, quota, response);
  CapSkipped(skipped_unlisted, response);
  Count(response.status, response.wall_ms);
  Notes().run_status = RunStatusName(response.status);
  Notes().run_ms = response.wall_ms;
  HttpResponse http;
  http.body = EncodeRunResponse(response);
  util::StampPhase("encoded");  // the run's tmpfs and cgroup go after the response is sent
  return http;
}

Result<RunResponse> Service::RunSteps(const RunRequest& run, const std::string& id,
                                      const std::string& workspace, const std::string& tmp,
                                      const std::string& root, const std::string& outputs,
                                      sandbox::RunCgroup* cgroup) const {
  const config::Limits& limits = run.limits;
  RunResponse response;
  response.id = id;
  response.status = RunStatus::kOk;
  response.limits = limits;
  const bool multi = MultiStep(run);
  const size_t programs = static_cast<size_t>(std::count_if(
      run.steps.begin(), run.steps.end(), [](const CodeStep& s) { return s.save_as.empty(); }));
  if (multi) response.steps.emplace();
  int64_t program_ms = 0;  // wall time of the program steps (install steps have their own)
  uint64_t output_used = 0;
  bool stopped = false;
  for (size_t i = 0; i < run.steps.size(); ++i) {
    const CodeStep& step = run.steps[i];
    const uid_t uid = static_cast<uid_t>(config_.sandbox_uid);
    const gid_t gid = static_cast<gid_t>(config_.sandbox_gid);
    if (!step.save_as.empty()) continue;  // written before the run (HandleRun)
    if (stopped) break;
    const bool install = IsInstallStep(step);
    // An install step whose packages the run's prepared environment holds is not run.
    if (auto satisfied =
            install ? SatisfiedByEnvironment(
                          run, step, step.block_index >= 0 ? step.block_index : static_cast<int>(i))
                    : std::nullopt) {
      response.stdout_stream.text += satisfied->stdout_stream.text;
      if (response.steps) response.steps->push_back(std::move(*satisfied));
      continue;
    }
    const int64_t wall_left_ms =
        install ? config_.install_wall_time_s * 1000 : limits.wall_time_s * 1000 - program_ms;
    const uint64_t output_left = static_cast<uint64_t>(limits.output_bytes) -
                                 std::min<uint64_t>(output_used, limits.output_bytes);
    if (wall_left_ms <= 0 || output_left < 1024) {
      response.status = wall_left_ms <= 0 ? RunStatus::kTimeout : RunStatus::kOutputLimit;
      AppendLine(response.stderr_stream.text,
                 "sandrun: " + step.title + " not run: the run's " +
                     (wall_left_ms <= 0 ? "wall-clock time" : "output") + " budget is spent");
      break;
    }
    // The program file: .sandrun/main.py for one step, .sandrun/<i>/main.py for several.
    const std::string rel = ProgramPath(run, i);
    sandbox::SandboxSpec spec;
    for (const auto& arg : step.language->argv) {
      if (arg == "{file}") {
        spec.argv.push_back(std::string(kProgramDir) + "/" + rel);
      } else if (arg == "{loader}") {
        spec.argv.push_back(python::kLoaderPath);
      } else {
        spec.argv.push_back(arg);
      }
    }
    spec.env = SandboxEnv(config_);
    for (auto& line : NotebookEnv(config_)) spec.env.push_back(std::move(line));
    spec.outputs_dir = outputs;
    spec.environment_dir = run.environment_dir;
    if (!run.environment_dir.empty()) AddEnvironmentToPath(&spec.env);
    spec.workspace_dir = workspace;
    spec.readonly_workspace_dirs = {util::kProgramDir};
    spec.tmp_dir = tmp;
    spec.root_dir = root;
    if (i + 1 == run.steps.size()) spec.stdin_data = run.stdin_data;
    spec.host_uid = uid;
    spec.host_gid = gid;
    spec.run_id = id;
    spec.limits.wall_time_ms = wall_left_ms;
    spec.limits.cpu_time_s = limits.cpu_time_s;
    spec.limits.memory_bytes = static_cast<uint64_t>(limits.memory_mb) << 20;
    spec.limits.processes = limits.processes;
    spec.limits.output_bytes = output_left;
    spec.limits.file_size_bytes = static_cast<uint64_t>(limits.file_size_mb) << 20;
    spec.limits.disk_bytes = static_cast<uint64_t>(limits.disk_mb) << 20;
    if (install) {
      // The install budget (issue 9 part 2) replaces the program's time and size limits: a
      // wheel (numpy's is 18 MB) and pip's unpacking in /tmp are bigger than a program's
      // files, and pip's CPU time is bounded by its wall time.
      spec.limits.cpu_time_s = config_.install_wall_time_s;
      spec.limits.file_size_bytes = static_cast<uint64_t>(config_.install_disk_mb) << 20;
      spec.limits.disk_bytes = static_cast<uint64_t>(config_.install_disk_mb) << 20;
    }
    spec.network.enabled = run.network;
    spec.network.allow_cidrs = config_.network_allow_cidrs;

    // Steps run one after the other in the run's cgroup; each one's outcome is its own.
    auto result = runner_->Run(spec, cgroup);
    if (!result.ok()) return result.error();
    StepResult sr;
    sr.index = step.block_index >= 0 ? step.block_index : static_cast<int>(i);
    sr.language = step.language->name;
    sr.code = step.code;
    sr.status = StatusOf(*result);
    if (result->exit_code >= 0) sr.exit_code = result->exit_code;
    if (result->signal > 0) sr.signal = result->signal;
    sr.stdout_stream = {result->stdout_text, result->stdout_truncated};
    sr.stderr_stream = {result->stderr_text, result->stderr_truncated};
    sr.wall_ms = result->wall_ms;
    sr.budget = install ? "install" : "program";
    if (!install) program_ms += result->wall_ms;
    if (install && result->outcome == sandbox::RunOutcome::kWallTimeout) {
      AppendLine(sr.stderr_stream.text,
                 "sandrun: stopped: the install budget's wall-clock time of " +
                     std::to_string(config_.install_wall_time_s) +
                     " s (install_wall_time_s) reached");
    } else if (std::string note = LimitNote(*result, limits); !note.empty()) {
      AppendLine(sr.stderr_stream.text, note);
    }
    if (result->net_rx_bytes >= 0) {
      response.net_rx_bytes = response.net_rx_bytes.value_or(0) + result->net_rx_bytes;
      response.net_tx_bytes = response.net_tx_bytes.value_or(0) + result->net_tx_bytes;
    }
    // Part 3 of issue 9: an install that found nothing because the run has no network says
    // so, and what is there already.
    if (MentionsInstall(step) && !run.network &&
        PipFoundNothing(sr.stdout_stream.text + sr.stderr_stream.text)) {
      const std::vector<std::string> requested = RequestedPackages(step.code);
      AppendLine(sr.stderr_stream.text,
                 NetworkOffNote(requested,
                                AvailablePackages(requested, sr.stdout_stream.text, HostSiteDirs()),
                                config_.network));
    }
    if (result->process_limit_hits > 0) {
      // A run that hit its process limit did not do what it tried (a fork bomb, a pool too
      // big): say so, and never call it "ok" even if the main program exited 0.
      if (sr.status == RunStatus::kOk) sr.status = RunStatus::kError;
      AppendLine(sr.stderr_stream.text, "sandrun: the run reached its process limit of " +
                                            std::to_string(limits.processes) +
                                            " (the kernel refused " +
                                            std::to_string(result->process_limit_hits) + " forks)");
    }
    output_used += result->stdout_text.size() + result->stderr_text.size();
    // Joined streams: a header line per step when more than one program runs.
    if (programs > 1) {
      AppendLine(response.stdout_stream.text, "--- " + step.title + " ---");
      if (!sr.stderr_stream.text.empty()) {
        AppendLine(response.stderr_stream.text, "--- " + step.title + " ---");
      }
    }
    response.stdout_stream.text += sr.stdout_stream.text;
    response.stderr_stream.text += sr.stderr_stream.text;
    response.stdout_stream.truncated |= sr.stdout_stream.truncated;
    response.stderr_stream.truncated |= sr.stderr_stream.truncated;
    const bool failed = sr.status != RunStatus::kOk;
    // Top-level exit code and signal go with the top-level status: the first failure's.
    if (response.status == RunStatus::kOk) {
      response.exit_code = sr.exit_code;
      response.signal = sr.signal;
    }
    response.wall_ms += result->wall_ms;
    response.cpu_ms += result->cpu_ms;
    response.max_rss_kb = std::max(response.max_rss_kb, result->max_rss_kb);
    if (failed && response.status == RunStatus::kOk) response.status = sr.status;
    if (response.steps) response.steps->push_back(std::move(sr));
    if (failed && !run.continue_on_error) stopped = true;
  }
  return response;
}

}  // namespace sandrun::api
