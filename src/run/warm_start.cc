// The run side of the warm pool (warm_pool.h): which runs fit a pooled
// sandbox, and how one is made.
#include <cstdio>

#include "python/support_files.h"
#include "run/engine.h"
#include "run/packages.h"
#include "run/run_displays.h"
#include "run/sandbox_specs.h"
#include "storage/workspace_file.h"
#include "sys/syscalls.h"
#include "util/reserved_dirs.h"
#include "util/text.h"

namespace sandrun::run {
namespace {

// The waiting bash: says it is ready (ASCII ACK on stdout, sandbox::kWarmReadyByte), reads
// the start line one byte at a time (bash's `read` on a pipe takes
// nothing past the newline), lowers RLIMIT_CPU (SIGXCPU at the limit, SIGKILL a second later,
// as the cold start sets them) and RLIMIT_FSIZE (1024-byte blocks), then becomes `bash
// PROGRAM` as a cold start runs it (SHLVL unset so the program sees 1, as there).
constexpr char kBashWarmScript[] =
    "printf '\\006'; IFS=' ' read -r cpu fsize program || exit 0; "
    "ulimit -St \"$cpu\" && ulimit -Ht \"$((cpu + 1))\" && ulimit -f \"$((fsize / 1024))\" || "
    "exit 126; unset SHLVL cpu fsize; exec \"$0\" \"$program\"";

constexpr char kWarmPrefix[] = "pool-";
constexpr char kWarmLoaderPath[] = "/home/user/.sandrun/python/sandrun_warm.py";

}  // namespace

std::optional<std::vector<std::string>> WarmArgv(const config::Language& language) {
  const std::vector<std::string>& argv = language.argv;
  if (argv.size() == 3 && argv[1] == "{loader}" && argv[2] == "{file}") {
    return std::vector<std::string>{argv[0], kWarmLoaderPath};
  }
  const std::string& shell = argv[0];
  if (argv.size() == 2 && argv[1] == "{file}" && shell.size() >= 5 &&
      shell.compare(shell.size() - 5, 5, "/bash") == 0) {
    return std::vector<std::string>{shell, "-c", kBashWarmScript, shell};
  }
  return std::nullopt;
}

std::map<std::string, int64_t> WarmPoolSizes(const config::Config& config, bool can_sandbox) {
  std::map<std::string, int64_t> sizes;
  if (!can_sandbox) return sizes;
  for (const auto& [name, size] : config.pool) {
    const config::Language* language = nullptr;
    for (const auto& l : config.languages) {
      if (l.name == name) language = &l;
    }
    if (language != nullptr && WarmArgv(*language) && size > 0) sizes[name] = size;
  }
  return sizes;
}

std::string WarmStartLine(const sandbox::SandboxSpec& spec) {
  return std::to_string(spec.limits.cpu_time_s) + " " +
         std::to_string(sandbox::RlimitFsizeBytes(spec.limits.file_size_bytes)) + " " +
         spec.argv.back() + "\n";
}

std::unique_ptr<WarmSandbox> Engine::TakeWarmSandbox(const RunRequest& run, bool session_held,
                                                     const std::string& run_id) {
  if (!WarmShapeFits(run, session_held)) return nullptr;
  const CodeStep& program = run.steps[PartitionSteps(run.steps).programs.front()];
  std::unique_ptr<WarmSandbox> warm = pool_.Take(program.language->name, run.limits.disk_mb);
  if (!warm) return nullptr;
  // The run's id on its directory and (v1) cgroup, as a cold run has them.
  RunTeardown& t = *warm->teardown;
  Status s = t.dir.Rename(config_.runs_dir + "/" + run_id);
  if (s.ok() && t.cgroup) s = t.cgroup->Rename(run_id);
  if (!s.ok()) {
    std::fprintf(stderr, "sandrund: warm pool: %s; the run starts cold\n",
                 s.error().message.c_str());
    return nullptr;
  }
  warm->id = run_id;
  return warm;
}

bool Engine::WarmShapeFits(const RunRequest& run, bool session_held) const {
  if (session_held || run.stateful || run.network || !run.environment_dir.empty()) return false;
  const std::vector<size_t> programs = PartitionSteps(run.steps).programs;
  if (programs.size() != 1) return false;  // none, or several programs: cold
  const CodeStep& program = run.steps[programs.front()];
  // An install step runs on the install budget: cold.
  if (program.language == nullptr || IsInstallStep(program)) return false;
  // The pool's sandboxes have the default disk_mb: its tmpfs and /dev/shm are that size.
  return pool_.Serves(program.language->name) && run.limits.disk_mb == LiveConfig()->limits.disk_mb;
}

bool Engine::ZygoteShapeFits(const RunRequest& run, bool session_held) const {
  if (!config_.zygote || session_held || run.stateful || run.network ||
      !run.environment_dir.empty()) {
    return false;
  }
  const std::vector<size_t> programs = PartitionSteps(run.steps).programs;
  if (programs.size() != 1) return false;
  const CodeStep& program = run.steps[programs.front()];
  if (program.language == nullptr || IsInstallStep(program)) return false;
  const std::vector<std::string>& argv = program.language->argv;
  return argv.size() == 3 && argv[1] == "{loader}" && argv[2] == "{file}";
}

// A pooled sandbox is the sandbox of a run of one program of `language` with the default
// limits, made as a cold run's is (MakeRunDir, WriteSupportFiles, PlaceFontCache, StepSpec);
// only its argv (the warm entry), its rlimits (at the ceilings, lowered by the start line) and
// its name differ.
Result<std::unique_ptr<WarmSandbox>> Engine::MakeWarmSandbox(const std::string& language) const {
  const config::Language* lang = nullptr;
  for (const auto& l : config_.languages) {
    if (l.name == language) lang = &l;
  }
  auto argv = lang ? WarmArgv(*lang) : std::nullopt;
  if (!argv) return MakeError(ErrorKind::kSystem, "language " + language + " has no warm start");
  const std::shared_ptr<const config::Config> live = LiveConfig();
  RunRequest pooled;
  pooled.limits = live->limits;
  CodeStep step;
  step.language = lang;
  pooled.steps.push_back(step);
  auto sandbox = std::make_unique<WarmSandbox>();
  // "pool-<hex>" until a run takes it and renames both to its id (TakeWarmSandbox): what
  // is named so on the host belongs to the pool, not to a run.
  sandbox->id = std::string(kWarmPrefix) + util::RandomHex(16);
  sandbox->language = language;
  sandbox->disk_mb = pooled.limits.disk_mb;
  auto made = MakeRunDir(pooled, sandbox->id);
  if (!made.ok()) return made.error();
  sandbox->teardown = std::move(*made);
  const RunPaths paths = sandbox->teardown->dir.paths();
  if (Status s = WriteSupportFiles(paths.workspace, support_bytecode_); !s.ok()) return s.error();
  PlaceFontCache(paths.tmp);
  sandbox::SandboxSpec spec = StepSpec(
      config_, pooled, 0, sandbox->id, paths,
      {pooled.limits.wall_time_s * 1000, static_cast<uint64_t>(pooled.limits.output_bytes)});
  spec.argv = std::move(*argv);
  // The rlimits at the ceilings until the start line lowers them to the run's (nothing of
  // the user's runs before); the cgroup's limits are the run's from RunWaiting on.
  spec.limits = SandboxLimitsFor(*live, pooled.limits, SandboxUse::kWarm);
  auto waiting = runner_->StartWaiting(spec, sandbox->teardown->cgroup.get());
  if (!waiting.ok()) return waiting.error();
  sandbox->sandbox = std::move(*waiting);
  return sandbox;
}

}  // namespace sandrun::run
