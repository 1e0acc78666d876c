#include "run/run_steps.h"

#include <algorithm>
#include <cctype>

#include "markdown/block_analysis.h"
#include "markdown/text_util.h"
#include "python/support_files.h"
#include "run/environments.h"
#include "run/install_step.h"
#include "run/packages.h"
#include "run/run_displays.h"
#include "run/sandbox_specs.h"
#include "sandbox/mounts.h"
#include "sys/syscalls.h"
#include "util/reserved_dirs.h"

namespace sandrun::run {
namespace {

// util::kProgramDir as the sandbox sees it.
constexpr char kProgramDirInside[] = "/home/user/.sandrun";

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
      // pip as users type it: user-site installs (sandbox/mounts.h kPipConfig), Debian's
      // PEP 668 refusal lifted inside the sandbox only, and a fast failure without network
      // (no retries, short timeout).
      "PIP_CONFIG_FILE=" + std::string(sandbox::kPipConfigInside),
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

std::vector<std::string> InstallEnv(const config::Config& config) {
  std::vector<std::string> env;
  for (std::string& line : SandboxEnv(config)) {
    const std::string key = line.substr(0, line.find('='));
    if (key == "HOME" || key == "PATH" || key == "PYTHONPATH" || key == "PIP_CACHE_DIR" ||
        key == "XDG_CACHE_HOME" || key == "MPLCONFIGDIR" || key == "MPLBACKEND") {
      continue;
    }
    env.push_back(std::move(line));
  }
  env.push_back(std::string("HOME=") + kInstallHome);
  env.push_back("PATH=/usr/local/bin:/usr/bin:/bin");
  env.push_back("PYTHONNOUSERSITE=1");
  env.push_back("PYTHONUSERBASE=/home/user/.local");
  return env;
}

std::string ProgramText(const CodeStep& step) {
  if (step.language == nullptr || step.language->name != "bash") return step.code;
  PureInstall pure;
  if (!ParsePureInstall(step.code, &pure).empty()) return step.code;
  return pure.script;
}

namespace {
std::string ShellQuote(const std::string& word) {
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}
}  // namespace

std::vector<std::string> EnvironmentBuildEnv(const config::Config& config) {
  std::vector<std::string> env;
  for (std::string& line : SandboxEnv(config)) {
    const std::string key = line.substr(0, line.find('='));
    if (key == "PATH" || key == "PYTHONPATH" || key == "PIP_CONFIG_FILE" || key == "PIP_RETRIES" ||
        key == "PIP_TIMEOUT" || key == "PIP_CACHE_DIR" || key == "PYTHONDONTWRITEBYTECODE" ||
        key == "XDG_CACHE_HOME" || key == "MPLCONFIGDIR" || key == "MPLBACKEND") {
      continue;
    }
    env.push_back(std::move(line));
  }
  env.push_back("PATH=/usr/local/bin:/usr/bin:/bin");
  env.push_back("PIP_PROGRESS_BAR=off");
  env.push_back("PIP_TIMEOUT=15");
  return env;
}

std::string InstallCell(const config::Config& config, const CodeStep& step) {
  // The daemon's script (ProgramText), under env -i with InstallEnv: the kernel's environment
  // (PYTHONPATH, the user site with whatever .pth the workspace holds) never reaches pip.
  std::string cell = "%%bash\nexec env -i";
  for (const std::string& line : InstallEnv(config)) cell += " " + ShellQuote(line);
  return cell + " /bin/bash -c " + ShellQuote(ProgramText(step)) + "\n";
}

StepParts PartitionSteps(const std::vector<CodeStep>& steps) {
  StepParts parts;
  for (size_t i = 0; i < steps.size(); ++i) {
    (steps[i].save_as.empty() ? parts.programs : parts.files).push_back(i);
  }
  return parts;
}

bool IsInstallStep(const CodeStep& step) {
  return step.language != nullptr && step.language->name == "bash" && IsInstallOnlyCode(step.code);
}

bool MentionsInstall(const CodeStep& step) {
  return step.language != nullptr && step.language->name == "bash" && IsInstallCode(step.code);
}

bool MultiStep(const RunRequest& run) { return run.markdown.has_value() || run.steps.size() > 1; }

std::string ProgramPath(const RunRequest& run, size_t i) {
  const std::string& name = run.steps[i].language->file_name;
  return MultiStep(run) ? std::to_string(i) + "/" + name : name;
}

int StepIndex(const CodeStep& step, size_t i) {
  return step.block_index >= 0 ? step.block_index : static_cast<int>(i);
}

StepBudget BudgetLeft(const config::Config& config, const RunRequest& run, const CodeStep& step,
                      int64_t program_ms, uint64_t output_used) {
  const config::Limits& limits = run.limits;
  StepBudget budget;
  budget.wall_ms = IsInstallStep(step) ? config.install_wall_time_s * 1000
                                       : limits.wall_time_s * 1000 - program_ms;
  budget.output_bytes = static_cast<uint64_t>(limits.output_bytes) -
                        std::min<uint64_t>(output_used, limits.output_bytes);
  return budget;
}

std::string BudgetSpent(const StepBudget& budget) {
  if (budget.wall_ms <= 0) return "wall-clock time";
  if (budget.output_bytes < 1024) return "output";
  return "";
}

sandbox::SandboxSpec StepSpec(const config::Config& config, const RunRequest& run, size_t i,
                              const std::string& id, const RunPaths& paths,
                              const StepBudget& budget) {
  const CodeStep& step = run.steps[i];
  const bool install = IsInstallStep(step);
  sandbox::SandboxSpec spec = BaseSpec(
      config, run.limits, install ? SandboxUse::kInstallStep : SandboxUse::kStep, id, run.network);
  for (const auto& arg : step.language->argv) {
    if (arg == "{file}") {
      // .sandrun/main.py for one step, .sandrun/<i>/main.py for several.
      spec.argv.push_back(std::string(kProgramDirInside) + "/" + ProgramPath(run, i));
    } else if (arg == "{loader}") {
      spec.argv.push_back(python::kLoaderPath);
    } else {
      spec.argv.push_back(arg);
    }
  }
  spec.env = SandboxEnv(config);
  for (auto& line : NotebookEnv(config)) spec.env.push_back(std::move(line));
  spec.outputs_dir = paths.outputs;
  spec.environment_dir = run.environment_dir;
  if (!run.environment_dir.empty()) AddEnvironmentToPath(&spec.env);
  if (install) {
    // The daemon's script (ProgramText) under the system's bash, whatever the configured
    // shell, in an environment that names nothing of the workspace.
    spec.argv = {"/bin/bash", std::string(kProgramDirInside) + "/" + ProgramPath(run, i)};
    spec.env = InstallEnv(config);
  }
  spec.net_owner = run.user;
  spec.workspace_dir = paths.workspace;
  spec.readonly_workspace_dirs = {util::kProgramDir};
  spec.tmp_dir = paths.tmp;
  if (i == StdinStep(run)) spec.stdin_data = run.stdin_data;
  // What the earlier steps left of the run's wall time and output.
  spec.limits.wall_time_ms = budget.wall_ms;
  spec.limits.output_bytes = budget.output_bytes;
  return spec;
}

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

Status WriteSupportFiles(const std::string& workspace,
                         const std::vector<SupportBytecode>& bytecode) {
  const std::string support = workspace + "/" + python::kSupportDirInWorkspace;
  if (Status s = sys::MakeDirs(support, 0755); !s.ok()) return s;
  for (const auto& file : python::SupportFiles()) {
    if (Status s = sys::WriteFile(support + "/" + file.name, std::string(file.content), 0644);
        !s.ok()) {
      return s;
    }
  }
  if (bytecode.empty()) return OkStatus();
  const std::string cache = support + "/__pycache__";
  if (Status s = sys::MakeDirs(cache, 0755); !s.ok()) return s;
  for (const auto& file : bytecode) {
    if (Status s = sys::WriteFile(cache + "/" + file.name, file.bytes, 0644); !s.ok()) return s;
  }
  return OkStatus();
}

void JoinStreams(const StepResult& sr, bool headers, const std::string& title, int64_t net_rx_bytes,
                 int64_t net_tx_bytes, RunResponse* response) {
  if (net_rx_bytes >= 0) {
    response->net_rx_bytes = response->net_rx_bytes.value_or(0) + net_rx_bytes;
    response->net_tx_bytes = response->net_tx_bytes.value_or(0) + net_tx_bytes;
  }
  // Headers count steps from 1, as the plan does; a stream the step wrote nothing to gets none.
  if (headers && !sr.stdout_stream.text.empty()) {
    AppendLine(response->stdout_stream.text, "--- " + title + " ---");
  }
  if (headers && !sr.stderr_stream.text.empty()) {
    AppendLine(response->stderr_stream.text, "--- " + title + " ---");
  }
  response->stdout_stream.text += sr.stdout_stream.text;
  response->stderr_stream.text += sr.stderr_stream.text;
}

void JoinStep(StepRun ran, bool headers, const std::string& title, RunResponse* response) {
  StepResult& sr = ran.step;
  JoinStreams(sr, headers, title, ran.net_rx_bytes, ran.net_tx_bytes, response);
  response->stdout_stream.truncated |= sr.stdout_stream.truncated;
  response->stderr_stream.truncated |= sr.stderr_stream.truncated;
  // Top-level exit code and signal go with the top-level status: the first failure's.
  if (response->status == RunStatus::kOk) {
    response->exit_code = sr.exit_code;
    response->signal = sr.signal;
    response->status = sr.status;
  }
  response->wall_ms += sr.wall_ms;
  response->cpu_ms += ran.cpu_ms;
  response->max_rss_kb = std::max(response->max_rss_kb, ran.max_rss_kb);
  if (response->steps) response->steps->push_back(std::move(sr));
}

StepRun DescribeStep(const config::Config& config, const RunRequest& run, size_t i,
                     const sandbox::SandboxResult& result) {
  const CodeStep& step = run.steps[i];
  const bool install = IsInstallStep(step);
  StepRun ran;
  StepResult& sr = ran.step;
  sr.index = StepIndex(step, i);
  sr.language = step.language->name;
  sr.code = step.code;
  sr.status = StatusOf(result);
  if (result.exit_code >= 0) sr.exit_code = result.exit_code;
  if (result.signal > 0) sr.signal = result.signal;
  sr.stdout_stream = {result.stdout_text, result.stdout_truncated};
  sr.stderr_stream = {result.stderr_text, result.stderr_truncated};
  sr.wall_ms = result.wall_ms;
  sr.budget = install ? "install" : "program";
  if (install && result.outcome == sandbox::RunOutcome::kWallTimeout) {
    AppendLine(sr.stderr_stream.text, "sandrun: stopped: the install budget's wall-clock time of " +
                                          std::to_string(config.install_wall_time_s) +
                                          " s (install_wall_time_s) reached");
  } else if (std::string note = LimitNote(result, run.limits); !note.empty()) {
    AppendLine(sr.stderr_stream.text, note);
  }
  // An install that found nothing because the run has no network says
  // so, and what is there already.
  if (MentionsInstall(step) && !run.network &&
      PipFoundNothing(sr.stdout_stream.text + sr.stderr_stream.text)) {
    const std::vector<std::string> requested = RequestedPackages(step.code);
    AppendLine(sr.stderr_stream.text,
               NetworkOffNote(requested,
                              AvailablePackages(requested, sr.stdout_stream.text, HostSiteDirs()),
                              config.network));
  } else if (MentionsInstall(step) && run.network &&
             PipFoundNothing(sr.stdout_stream.text + sr.stderr_stream.text)) {
    // With the network, "from versions: none" may still mean no index was reachable.
    const std::string note =
        IndexUnreachableNote(sr.stdout_stream.text + sr.stderr_stream.text, config);
    if (!note.empty()) AppendLine(sr.stderr_stream.text, note);
  }
  if (result.process_limit_hits > 0) {
    // A run that hit its process limit did not do what it tried (a fork bomb, a pool too
    // big): say so, and never call it "ok" even if the main program exited 0.
    if (sr.status == RunStatus::kOk) sr.status = RunStatus::kError;
    AppendLine(sr.stderr_stream.text, "sandrun: the run reached its process limit of " +
                                          std::to_string(run.limits.processes) +
                                          " (the kernel refused " +
                                          std::to_string(result.process_limit_hits) + " forks)");
  }
  ran.cpu_ms = result.cpu_ms;
  ran.max_rss_kb = result.max_rss_kb;
  ran.net_rx_bytes = result.net_rx_bytes;
  ran.net_tx_bytes = result.net_tx_bytes;
  ran.output_bytes = result.stdout_text.size() + result.stderr_text.size();
  return ran;
}

void AppendLine(std::string& text, const std::string& line) {
  if (!text.empty() && text.back() != '\n') text.push_back('\n');
  text += line + "\n";
}

std::string DiskFullNote(const RunRequest& run, const std::string& workspace_dir) {
  auto left = sys::AvailableBytes(workspace_dir);
  if (!left.ok() || *left != 0) return "";
  const bool installs = std::any_of(run.steps.begin(), run.steps.end(), IsInstallStep);
  return "sandrun: the run's disk is full: the workspace and /tmp share " +
         std::to_string(run.limits.disk_mb) + " MiB (disk_mb" +
         (installs ? ", plus install_disk_mb for the install" : "") +
         "); a write past it fails with 'No space left on device'";
}

std::string BlockName(const RunRequest& run, size_t i) {
  const CodeStep& step = run.steps[i];
  if (run.markdown && step.block_index >= 0) return "block " + std::to_string(step.block_index + 1);
  return "snippet " + std::to_string(i + 1);
}

std::string NameCells(const std::string& traceback, const std::map<int, std::string>& blocks) {
  // IPython 8.5 (Debian 12) writes "Cell In [3]", later ones "Cell In[3]".
  const std::string marker = "Cell In";
  std::string out;
  size_t from = 0;
  for (size_t at = traceback.find(marker); at != std::string::npos;
       at = traceback.find(marker, from)) {
    out.append(traceback, from, at - from);
    size_t pos = at + marker.size();
    if (pos < traceback.size() && traceback[pos] == ' ') ++pos;
    const bool open = pos < traceback.size() && traceback[pos] == '[';
    const size_t first_digit = ++pos;
    int count = 0;
    while (open && pos < traceback.size() && pos - first_digit < 9 &&
           std::isdigit(static_cast<unsigned char>(traceback[pos]))) {
      count = count * 10 + (traceback[pos++] - '0');
    }
    auto named = blocks.find(count);
    if (open && pos > first_digit && pos < traceback.size() && traceback[pos] == ']' &&
        named != blocks.end()) {
      out += named->second;
      from = pos + 1;
    } else {
      out += marker;
      from = at + marker.size();
    }
  }
  out.append(traceback, from, std::string::npos);
  return out;
}

std::string NameStepFile(const RunRequest& run, size_t i, const std::string& stderr_text) {
  const CodeStep& step = run.steps[i];
  if (!run.markdown || step.block_index < 0 || step.language == nullptr) return stderr_text;
  const std::string file =
      "File \"" + std::string(kProgramDirInside) + "/" + ProgramPath(run, i) + "\", line";
  const std::string named = BlockName(run, i) + ", line";
  std::string out;
  size_t from = 0;
  for (size_t at = stderr_text.find(file); at != std::string::npos;
       at = stderr_text.find(file, from)) {
    out.append(stderr_text, from, at - from);
    out += named;
    from = at + file.size();
  }
  out.append(stderr_text, from, std::string::npos);
  return out;
}

size_t StdinStep(const RunRequest& run) {
  if (run.markdown) {
    for (size_t i : PartitionSteps(run.steps).programs) {
      if (!run.steps[i].reads_stdin.empty()) return i;
    }
  }
  return run.steps.empty() ? 0 : run.steps.size() - 1;
}

std::string NoInputNote(const RunRequest& run, size_t i, const std::string& step_stderr) {
  if (i == StdinStep(run) && !run.stdin_data.empty()) return "";
  const CodeStep& step = run.steps[i];
  std::string what = step.reads_stdin;
  if (what.empty() && !run.markdown && step.language != nullptr) {
    // A program sent as `code` or `snippets`: the same look at its text.
    const std::string& lang = step.language->name;
    what =
        markdown::StdinReader(step.code, lang == "python"                 ? markdown::kPythonFamily
                                         : lang == "bash" || lang == "sh" ? markdown::kShellFamily
                                                                          : "");
  }
  // input() at the end of input raises this; a program that catches it, or reads sys.stdin
  // or runs `read`, just sees the end: said whenever the plan sees such a read.
  const bool eof_error = step_stderr.find("EOFError: EOF when reading a line") != std::string::npos;
  const bool input_call = what.rfind("input()", 0) == 0;
  if (eof_error) {
    if (!input_call) what = "input()";
  } else if (what.empty() || input_call) {
    return "";
  }
  const std::string why = run.stdin_data.empty() ? "the request has no `stdin`"
                                                 : "the request's `stdin` went to another step";
  return "sandrun: the program asked for input (" + what + ") and got none: stdin is empty (" +
         why + "; send the input in `stdin`)";
}

}  // namespace sandrun::run
