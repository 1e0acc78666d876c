// POST /run with "stateful": true: the run's Python goes to its session's
// live IPython kernel (src/kernel/), so variables, imports and loaded data stay between
// runs. Locking, admission, export and the session's save are those of every run
// (Engine::Run, ExportAndSave); only the steps run differently.
//
// A notebook run (a markdown answer with several Python blocks) runs the same way in a
// kernel of its own, started for the run and ended after it (IsNotebookRun,
// NotebookRun): block 2 sees the imports and variables of block 1.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>

#include "python/support_files.h"
#include "run/engine.h"
#include "run/kernel_notes.h"
#include "run/packages.h"
#include "run/run_steps.h"
#include "run/sandbox_specs.h"
#include "storage/artifact_store.h"
#include "storage/digest.h"
#include "storage/export.h"
#include "storage/workspace_file.h"
#include "sys/syscalls.h"
#include "util/text.h"

namespace sandrun::run {
namespace {

RunStatus StatusOfCell(kernel::ExecuteStatus status) {
  switch (status) {
    case kernel::ExecuteStatus::kOk:
      return RunStatus::kOk;
    case kernel::ExecuteStatus::kError:
      return RunStatus::kError;
    case kernel::ExecuteStatus::kWallTimeout:
    case kernel::ExecuteStatus::kCpuTimeout:
      return RunStatus::kTimeout;
    case kernel::ExecuteStatus::kMemoryLimit:
      return RunStatus::kMemoryLimit;
    case kernel::ExecuteStatus::kOutputLimit:
      return RunStatus::kOutputLimit;
    case kernel::ExecuteStatus::kKilled:
      return RunStatus::kKilled;
  }
  return RunStatus::kError;
}

// The stderr line saying which limit stopped the cell and what became of the kernel.
std::string KernelNote(const kernel::ExecuteResult& r, const config::Limits& limits,
                       bool session_kernel) {
  const std::string what = CellStoppedBy(r, limits);
  if (what.empty()) return "";
  // A notebook run's kernel is the run's own: nothing of it outlives the run anyway.
  if (!session_kernel) return "sandrun: stopped: " + what;
  const std::string fate =
      r.kernel_lost   ? "the kernel was ended: the next run starts a new one, without "
                        "the variables of earlier runs"
      : r.interrupted ? "the cell was interrupted; the kernel keeps its variables"
                      : "the kernel keeps its variables";
  return "sandrun: stopped: " + what + "; " + fate;
}

// The exit status in IPython's CalledProcessError of a failed %%bash cell ("Command '...'
// returned non-zero exit status 3."), or -1.
int BashExitCode(const std::string& evalue) {
  const std::string marker = "returned non-zero exit status ";
  const size_t at = evalue.rfind(marker);
  if (at == std::string::npos) return -1;
  int code = 0;
  size_t i = at + marker.size();
  for (; i < evalue.size() && i < at + marker.size() + 3 &&
         std::isdigit(static_cast<unsigned char>(evalue[i]));
       ++i) {
    code = code * 10 + (evalue[i] - '0');
  }
  return i > at + marker.size() ? code : -1;
}

// A cell that called sys.exit(`evalue`): as a program that did, not as a failure of the cell
// (IPython reports SystemExit as an error): no code, 0 or None is ok; a number is the exit
// code; anything else is printed on stderr, exit code 1. The later cells still run after an
// exit code 0, as the next program of a program run does.
void DescribeExit(const std::string& evalue, StepResult* sr) {
  if (evalue.empty() || evalue == "0" || evalue == "None") {
    sr->status = RunStatus::kOk;
    sr->exit_code = 0;
    return;
  }
  const bool number = evalue.size() <= 9 && std::all_of(evalue.begin(), evalue.end(), [](char c) {
                        return std::isdigit(static_cast<unsigned char>(c)) || c == '-';
                      });
  sr->exit_code = number ? (std::atoi(evalue.c_str()) & 0xff) : 1;
  if (!number) AppendLine(sr->stderr_stream.text, evalue);
  sr->status = sr->exit_code == 0 ? RunStatus::kOk : RunStatus::kError;
}

// Writes the images of `displays` as figure-N.png into `dir` (the daemon's own directory,
// not the workspace) and returns them as files to publish.
std::vector<storage::FoundFile> WriteImages(const std::vector<kernel::RichOutput>& displays,
                                            const std::string& dir) {
  std::vector<storage::FoundFile> files;
  int n = 0;
  for (const auto& d : displays) {
    if (d.kind != "image") continue;
    // Named as a fresh run names what it shows (figure-1.png, ...).
    const std::string name = "figure-" + std::to_string(++n) + ".png";
    if (!sys::WriteFile(dir + "/" + name, d.bytes, 0644).ok()) continue;
    files.push_back({name, d.bytes.size(), (d.bytes.size() + 4095) / 4096 * 4096});
  }
  return files;
}

// The pip notes of a stateless install step (RunSteps), for a cell whose pip install found
// nothing: a `%pip`/`!pip` line of a Python cell, or a %%bash cell. Without the network, the
// network-off note; with it, the index-unreachable note when pip's output shows why. IPython's
// %pip does not raise when pip fails, so the cell's status is not asked. "" when there is
// nothing to say.
std::string PipNote(const CodeStep& step, const kernel::ExecuteResult& er,
                    const config::Config& config, bool network) {
  const std::string install = step.language->name == "bash"
                                  ? (IsInstallCode(step.code) ? step.code : "")
                                  : CellInstallCode(step.code);
  const std::string output = er.stdout_text + er.stderr_text;
  if (install.empty() || !PipFoundNothing(output)) return "";
  if (network) return IndexUnreachableNote(output, config);
  const std::vector<std::string> requested = RequestedPackages(install);
  return NetworkOffNote(requested, AvailablePackages(requested, er.stdout_text, HostSiteDirs()),
                        config.network);
}

// The kernel of a stateful run: the run's limits that bound a kernel for its whole life
// (memory, processes, file size, disk) and its network, as a stateless run's (config
// "always" turns it on); a kernel with other ones is replaced (KernelManager::Acquire).
kernel::KernelSpec KernelSpecFor(const config::Config& config, const RunRequest& run) {
  const sandbox::SandboxSpec base =
      BaseSpec(config, run.limits, SandboxUse::kKernel, "", run.network);
  kernel::KernelSpec spec;
  spec.env = SandboxEnv(config);
  spec.limits = base.limits;
  spec.host_uid = base.host_uid;
  spec.host_gid = base.host_gid;
  spec.network = base.network;
  spec.zygote = config.kernel_zygote;
  // The kernel's set-up (python/sandrun_kernel.py): tables as a program run shows them
  // (sitecustomize's), and input() from the run's stdin.
  for (const auto& file : python::SupportFiles()) {
    const std::string name = file.name;
    if (name == "sandrun_kernel.py") spec.setup_files.emplace_back("setup.py", file.content);
    if (name == "sitecustomize.py") spec.setup_files.emplace_back(name, file.content);
  }
  if (!run.stdin_data.empty()) spec.setup_files.emplace_back("stdin", run.stdin_data);
  return spec;
}

// Cell `i` of `run` from what the kernel reported: status, streams (with the traceback),
// bash's exit code of a failed %%bash cell, the note of the limit that stopped it and the
// network-off note of a pip install that found nothing.
StepResult DescribeCell(const config::Config& config, const RunRequest& run, size_t i,
                        const kernel::ExecuteResult& er) {
  const CodeStep& step = run.steps[i];
  StepResult sr;
  sr.index = StepIndex(step, i);
  sr.language = step.language->name;
  sr.code = step.code;
  sr.status = StatusOfCell(er.status);
  sr.stdout_stream = {er.stdout_text, er.truncated};
  sr.stderr_stream = {er.stderr_text, er.truncated};
  // A failed %%bash cell raises CalledProcessError: report bash's exit code as a run of
  // bash does (its own stderr says why), not IPython's traceback of the magic.
  int bash_exit = -1;
  if (step.language->name == "bash" && er.ename == "CalledProcessError") {
    bash_exit = BashExitCode(er.evalue);
  }
  if (bash_exit > 0) {
    sr.exit_code = bash_exit;
  } else if (er.ename == "SystemExit" && er.status == kernel::ExecuteStatus::kError) {
    DescribeExit(er.evalue, &sr);
  } else {
    sr.stderr_stream.text += er.traceback;
  }
  sr.wall_ms = er.wall_ms;
  if (std::string note = KernelNote(er, run.limits, run.stateful); !note.empty()) {
    AppendLine(sr.stderr_stream.text, note);
  }
  if (std::string note = PipNote(step, er, config, run.network); !note.empty()) {
    AppendLine(sr.stderr_stream.text, note);
  }
  // A notebook run's cells read the run's one stdin; a stateful run has none to give.
  if (!run.stateful && run.stdin_data.empty()) {
    if (std::string note = NoInputNote(run, i, sr.stderr_stream.text); !note.empty()) {
      AppendLine(sr.stderr_stream.text, note);
    }
  }
  return sr;
}

// Adds cell `sr` (`er` what the kernel reported) to the run's `response`: joined streams
// (a header line naming `title` when the run has several programs: `headers`), totals, the
// first failure's status and exit code.
void JoinCell(StepResult sr, const kernel::ExecuteResult& er, bool headers,
              const std::string& title, RunResponse* response) {
  JoinStreams(sr, headers, title, er.net_rx_bytes, er.net_tx_bytes, response);
  response->stdout_stream.truncated |= er.truncated;
  response->wall_ms += er.wall_ms;
  response->cpu_ms += er.cpu_ms;
  response->max_rss_kb = std::max(response->max_rss_kb, er.max_rss_kb);
  if (sr.status != RunStatus::kOk && response->status == RunStatus::kOk) {
    response->status = sr.status;
    response->exit_code = sr.exit_code;
  }
  if (response->steps) response->steps->push_back(std::move(sr));
}

}  // namespace

kernel::KernelSpec Engine::JupyterKernelSpec(const config::Config& live) const {
  RunRequest run;
  run.limits = live.limits;
  run.network = live.network == "always";
  return KernelSpecFor(config_, run);
}

std::string Engine::KernelsUnavailable() const {
  if (runner_ == nullptr) return "this host cannot run sandboxes";
  if (runner_->cgroups() == nullptr) return "kernels need cgroups; this host runs without them";
  if (!runner_->cgroups()->can_freeze()) {
    return "kernels need the cgroup freezer (a kernel is frozen between cells); this host's "
           "cgroup v1 has no freezer hierarchy mounted at /sys/fs/cgroup/freezer";
  }
  return "";
}

std::optional<Refusal> Engine::CheckStateful(const RunRequest& run) const {
  if (runner_->cgroups() == nullptr) {
    return Refuse(RefusalCode::kUnavailable,
                  "stateful runs need cgroups (a kernel's CPU time is bounded per run from "
                  "its cgroup); this host runs without them",
                  "stateful");
  }
  if (!runner_->cgroups()->can_freeze()) {
    return Refuse(RefusalCode::kUnavailable,
                  "stateful runs need the cgroup freezer (a kernel is frozen between "
                  "runs); this host's cgroup v1 has no freezer hierarchy mounted at "
                  "/sys/fs/cgroup/freezer",
                  "stateful");
  }
  if (!run.stdin_data.empty()) {
    return Refuse(RefusalCode::kConflictingFields,
                  "'stdin' goes with a program run; a stateful run's cells have no stdin", "stdin");
  }
  for (size_t i : PartitionSteps(run.steps).programs) {
    const std::string& lang = run.steps[i].language->name;
    if (lang != "python" && lang != "bash") {
      return Refuse(RefusalCode::kConflictingFields,
                    "'stateful' runs Python (and bash as %%bash cells), not " + lang, "stateful");
    }
  }
  return std::nullopt;
}

kernel::KernelSpec Engine::PooledKernelSpec() const {
  RunRequest run;
  run.limits = LiveConfig()->limits;
  return KernelSpecFor(config_, run);
}

int64_t Engine::KernelPoolSize(const config::Config& config, const sandbox::SandboxRunner* runner) {
  const bool kernels =
      runner != nullptr && runner->cgroups() != nullptr && runner->cgroups()->can_freeze();
  return kernels ? config.kernel_pool_size : 0;
}

std::optional<Refusal> Engine::AcquireKernel(const RunRequest& run,
                                             const storage::SessionLock& session,
                                             const std::string& id,
                                             kernel::KernelManager::Acquired* acquired,
                                             storage::FileDigests* restored) {
  std::optional<Refusal> refused;
  auto got = kernels_.Acquire(
      KernelKey(run), KernelSpecFor(config_, run),
      [&](const std::string& workspace, sandbox::RunCgroup* cgroup) {
        if (auto r = RestoreSession(session, workspace, id, run.limits, cgroup, restored)) {
          refused = std::move(*r);
          return Status(MakeError(ErrorKind::kRefused, "session restore"));
        }
        return OkStatus();
      });
  if (refused) return refused;
  if (!got.ok()) {
    if (got.error().kind == ErrorKind::kUnavailable) {
      return Refusal{RefusalCode::kBusy, got.error().message + "; retry shortly", "",
                     ErrorKind::kUnavailable, 5};
    }
    return Refuse(RefusalCode::kSandboxError, "run " + id + ": " + got.error().message);
  }
  *acquired = std::move(*got);
  return std::nullopt;
}

RunEnd Engine::StatefulRun(const RunRequest& run, const config::Config& live, RunPreamble preamble,
                           const storage::SessionLock& session, const std::string& id) {
  if (auto refused = CheckStateful(run)) return Refused(std::move(*refused));
  kernel::KernelManager::Acquired acquired;
  storage::FileDigests restored;
  if (auto refused = AcquireKernel(run, session, id, &acquired, &restored)) {
    return Refused(std::move(*refused));
  }
  kernel::Kernel& k = acquired.lease.kernel();
  storage::FileDigests& digests = k.file_digests();
  if (acquired.status != "kept") digests = std::move(restored);
  // Input files and saved blocks, as in a stateless run (PlaceFile never follows a link the
  // kernel's code may have planted).
  if (auto refused = PlaceRunFiles(run, k.workspace(), &digests)) {
    return Refused(std::move(*refused));
  }
  std::vector<kernel::RichOutput> rich;
  CellsEnd end;
  RunResponse response = RunCells(run, id, k, acquired.note, run.markdown.has_value(), &rich, &end);
  if (end.kernel_lost) acquired.lease.SetLostReason(end.lost_reason);
  response.kernel = KernelInfo{acquired.status, end.execution_count, end.kernel_lost};
  std::optional<std::vector<PlanEntry>>& plan = preamble.plan;
  if (plan && response.steps) MarkBlocksNotRun(run.steps, *response.steps, response.status, &*plan);
  response.plan = std::move(plan);
  response.session_restarted = preamble.session_restarted;
  PublishDisplays(run, live, id, rich, &response);
  return ExportAndSave(run, live, k.workspace(), "", &digests, session, response);
}

RunResponse Engine::RunCells(const RunRequest& run, const std::string& id, kernel::Kernel& k,
                             const std::string& restart_note, bool name_blocks,
                             std::vector<kernel::RichOutput>* rich, CellsEnd* end) const {
  const config::Limits& limits = run.limits;
  RunResponse response;
  response.id = id;
  response.status = RunStatus::kOk;
  response.limits = limits;
  if (!restart_note.empty()) {
    AppendLine(response.stderr_stream.text,
               "sandrun: a new kernel: " + restart_note +
                   "; the variables of earlier runs are gone (the session's files are kept)");
  }
  const std::vector<size_t> programs = PartitionSteps(run.steps).programs;
  if (MultiStep(run)) response.steps.emplace();
  int64_t program_ms = 0;  // wall time of the program cells (install cells have their own)
  uint64_t output_used = 0;
  std::map<int, std::string> blocks;  // execution count -> the block's name in tracebacks
  bool ran_program = false;           // a program cell of this run has started
  for (size_t i : programs) {
    const CodeStep& step = run.steps[i];
    StepBudget budget = BudgetLeft(config_, run, step, program_ms, output_used);
    // Code of this run's earlier cells may still run in the kernel (a thread, a child): after
    // the first program cell, an install cell gets no more wall time than a program cell.
    if (IsInstallStep(step) && ran_program) {
      budget.wall_ms = std::min<int64_t>(budget.wall_ms, limits.wall_time_s * 1000 - program_ms);
    }
    if (const std::string spent = BudgetSpent(budget); !spent.empty()) {
      response.status = budget.wall_ms <= 0 ? RunStatus::kTimeout : RunStatus::kOutputLimit;
      AppendLine(response.stderr_stream.text,
                 "sandrun: " + step.title + " not run: the run's " + spent + " budget is spent");
      break;
    }
    const std::string code = IsInstallStep(step)             ? InstallCell(config_, step)
                             : step.language->name == "bash" ? "%%bash\n" + step.code
                                                             : step.code;
    if (!IsInstallStep(step)) ran_program = true;
    StepEvents events(run.events, StepIndex(step, i), step.language->name);
    kernel::ExecuteResult er = k.Execute(
        code, {budget.wall_ms, limits.cpu_time_s * 1000, budget.output_bytes}, events.observer());
    if (name_blocks && er.execution_count > 0) {
      blocks[er.execution_count] = BlockName(run, i);
      er.traceback = NameCells(er.traceback, blocks);
    }
    StepResult sr = DescribeCell(config_, run, i, er);
    if (std::string note = DiskFullNote(run, k.workspace()); !note.empty()) {
      AppendLine(sr.stderr_stream.text, note);
    }
    events.End(RunStatusName(sr.status), sr.exit_code);
    const bool failed = sr.status != RunStatus::kOk;
    if (er.execution_count > 0) end->execution_count = er.execution_count;
    if (!IsInstallStep(step)) program_ms += er.wall_ms;
    output_used += er.stdout_text.size() + er.stderr_text.size();
    JoinCell(std::move(sr), er, programs.size() > 1, step.title, &response);
    for (auto& d : er.displays) rich->push_back(std::move(d));
    if (er.kernel_lost) {
      end->kernel_lost = true;
      end->lost_reason = "the previous run stopped it (" +
                         std::string(RunStatusName(StatusOfCell(er.status))) + ")";
      break;
    }
    if (failed && !run.continue_on_error) break;
  }
  return response;
}

void Engine::PublishDisplays(const RunRequest& run, const config::Config& live,
                             const std::string& id, const std::vector<kernel::RichOutput>& rich,
                             RunResponse* response) {
  // Images: published from a directory of the daemon's, never in the workspace (so not in
  // the session), under the run's id + "-displays".
  const std::string images_dir = config_.runs_dir + "/" + id + "-displays";
  if (!sys::MakeDirs(images_dir, 0700).ok()) return;
  auto images = WriteImages(rich, images_dir);
  const storage::PublishOptions publish = MakePublishOptions(run, live);
  std::vector<storage::ArtifactFile> published_images;
  if (!images.empty()) {
    auto published = storage::Publish(images_dir, images, run.user, id + "-displays", publish);
    if (published.ok()) published_images = std::move(published->files);
  }
  size_t next_image = 0;
  for (const auto& d : rich) {
    Display out;
    out.kind = d.kind;
    out.mime = d.mime;
    if (d.kind == "image") {
      if (next_image >= published_images.size()) continue;
      out.file = published_images[next_image];
      // A shown figure is a file of the run too, as a program run's figure-N.png is.
      response->files.push_back(published_images[next_image++]);
    } else {
      out.text = util::SanitizeUtf8(d.text);
    }
    response->displays.push_back(std::move(out));
  }
  (void)sys::RemoveTree(images_dir);
}

bool Engine::IsNotebookRun(const RunRequest& run) const {
  if (run.stateful || !run.notebook.value_or(run.markdown.has_value())) return false;
  // Kernels need cgroups (CheckStateful), and a prepared environment is mounted only into
  // program runs: then the blocks run as separate programs, as before.
  if (runner_->cgroups() == nullptr || !run.environment_dir.empty()) return false;
  int python = 0;
  for (size_t i : PartitionSteps(run.steps).programs) {
    const std::string& lang = run.steps[i].language->name;
    if (lang == "python") {
      ++python;
    } else if (lang != "bash") {
      return false;
    }
  }
  return python >= 2;
}

RunEnd Engine::NotebookRun(const RunRequest& run, const config::Config& live, RunPreamble preamble,
                           const storage::SessionLock& session, const std::string& id) {
  // The run changes the session's files under the session's own kernel: it ends, as with a
  // stateless run.
  if (session.held()) {
    kernels_.End(KernelKey(run), "a stateless run of the session changed its files");
  }
  kernel::KernelSpec spec = KernelSpecFor(config_, run);
  // Installed packages land in the workspace (~/.local), as in MakeRunDir.
  if (std::any_of(run.steps.begin(), run.steps.end(), IsInstallStep)) {
    spec.limits.disk_bytes += static_cast<uint64_t>(config_.install_disk_mb) << 20;
  }
  std::optional<Refusal> refused;
  storage::FileDigests before;
  auto started =
      kernels_.StartForRun(spec, [&](const std::string& workspace, sandbox::RunCgroup* cgroup) {
        if (!session.held()) return OkStatus();
        refused = RestoreSession(session, workspace, id, run.limits, cgroup, &before);
        return refused ? Status(MakeError(ErrorKind::kRefused, "session restore")) : OkStatus();
      });
  if (refused) return Refused(std::move(*refused));
  if (!started.ok()) {
    if (started.error().kind == ErrorKind::kUnavailable) {
      return Refused(Refusal{RefusalCode::kStopping, started.error().message + "; retry shortly",
                             "", ErrorKind::kUnavailable, 5});
    }
    RunEnd end =
        Refused(Refuse(RefusalCode::kSandboxError, "run " + id + ": " + started.error().message));
    end.sandbox_error = true;
    return end;
  }
  std::shared_ptr<kernel::Kernel> k = std::move(*started);
  if (auto placed = PlaceRunFiles(run, k->workspace(), &before)) {
    return Refused(std::move(*placed));
  }
  std::vector<kernel::RichOutput> rich;
  CellsEnd end;
  RunResponse response = RunCells(run, id, *k, "", true, &rich, &end);
  std::optional<std::vector<PlanEntry>>& plan = preamble.plan;
  if (plan && response.steps) MarkBlocksNotRun(run.steps, *response.steps, response.status, &*plan);
  response.plan = std::move(plan);
  response.session_restarted = preamble.session_restarted;
  response.environment = std::move(preamble.environment);
  PublishDisplays(run, live, id, rich, &response);
  RunEnd done = ExportAndSave(run, live, k->workspace(), "", &before, session, response);
  done.after_send = std::move(k);  // ended (and its tmpfs unmounted) off the client's clock
  return done;
}

}  // namespace sandrun::run
