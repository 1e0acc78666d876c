// Prepared environments: the request's `packages` mapped onto the store
// (storage/environment_store.h), the build in a sandbox with the network, and the bounded
// wait of the requests that ask for a set while it builds.
#include "run/environments.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "run/engine.h"
#include "run/install_step.h"
#include "run/packages.h"
#include "run/requirements.h"
#include "run/run_steps.h"
#include "run/sandbox_specs.h"
#include "sandbox/spec.h"
#include "storage/dist_records.h"
#include "util/text.h"

namespace sandrun::run {
namespace {

// "python3.11": what /usr/bin/python3 is; part of every environment's id.
std::string PythonTag() {
  char buf[PATH_MAX];
  if (::realpath("/usr/bin/python3", buf) == nullptr) return "python3";
  const std::string path(buf);
  return path.substr(path.rfind('/') + 1);
}

std::string Joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

RunEnd Building(const std::string& message, int64_t retry_after_s) {
  return Refused(Refusal{RefusalCode::kEnvironmentBuilding, message, "packages",
                         ErrorKind::kUnavailable, std::max<int64_t>(1, retry_after_s)});
}

// The answer to a run whose environment could not be built (a 200: status error, pip's
// output; the code did not run).
RunEnd FailedBuild(const RunRequest& run, const storage::EnvironmentStore::Answer& answer) {
  RunResponse failed;
  failed.id = util::RandomHex(16);
  failed.status = RunStatus::kError;
  failed.limits = run.limits;
  failed.stderr_stream.text =
      "sandrun: the environment for " + Joined(run.packages) +
      " could not be built; the code did not run. This failure is remembered: the build "
      "is not tried again for " +
      std::to_string(answer.retry_after_s) + " s. pip's output:\n" +
      util::SanitizeUtf8(answer.failure_output);
  failed.environment = EnvironmentReport{answer.meta.id, run.packages, "failed", 0};
  RunEnd end;
  end.response = std::move(failed);
  return end;
}

}  // namespace

void AddEnvironmentToPath(std::vector<std::string>* env) {
  for (std::string& line : *env) {
    if (line.rfind("PYTHONPATH=", 0) == 0) line += std::string(":") + sandbox::kEnvironmentInside;
  }
}

std::vector<std::vector<std::string>> PrebuildSets(const config::Config& config, bool log) {
  std::vector<std::vector<std::string>> sets;
  for (const auto& set : config.environments_prebuild) {
    std::vector<Requirement> parsed;
    for (const auto& text : set) {
      Requirement r;
      if (std::string why = ParseRequirement(text, &r); !why.empty()) {
        if (log) {
          std::fprintf(stderr, "sandrund: environments_prebuild: '%s' %s; set skipped\n",
                       util::SanitizeUtf8(text).c_str(), why.c_str());
        }
        parsed.clear();
        break;
      }
      parsed.push_back(std::move(r));
    }
    if (!parsed.empty()) sets.push_back(NormalizeSet(parsed));
  }
  return sets;
}

std::optional<StepResult> SatisfiedByEnvironment(const RunRequest& run, const CodeStep& step,
                                                 int index) {
  if (run.environment_packages.empty() || step.language == nullptr) return std::nullopt;
  const std::vector<std::string> wanted = InstallRequirements(step.code);
  if (wanted.empty()) return std::nullopt;
  for (const auto& want : wanted) {
    if (!RequirementCovered(want, run.environment_packages)) return std::nullopt;
  }
  StepResult sr;
  sr.index = index;
  sr.language = step.language->name;
  sr.code = step.code;
  sr.status = RunStatus::kOk;
  sr.exit_code = 0;
  sr.stdout_stream.text = "sandrun: not installed again: " + Joined(wanted) +
                          " come from the prepared environment " + run.environment_id + "\n";
  sr.budget = "environment";
  return sr;
}

std::unique_ptr<storage::EnvironmentStore> Engine::MakeEnvironmentStore() {
  storage::EnvironmentStore::Options options;
  options.root = config_.environments_dir;
  options.python = PythonTag();
  return std::make_unique<storage::EnvironmentStore>(
      options, [this](const std::string& dir, const std::vector<std::string>& packages) {
        return BuildEnvironment(dir, packages);
      });
}

storage::BuildResult Engine::BuildEnvironment(const std::string& build_dir,
                                              const std::vector<std::string>& packages) const {
  storage::BuildResult out;
  const uid_t uid = static_cast<uid_t>(config_.sandbox_uid);
  const gid_t gid = static_cast<gid_t>(config_.sandbox_gid);
  const std::string ws = build_dir + "/ws";
  if (::mkdir(ws.c_str(), 0700) != 0 || ::chown(ws.c_str(), uid, gid) != 0 ||
      ::chmod(ws.c_str(), 0755) != 0) {
    out.output = "sandrun: cannot prepare the build directory " + build_dir;
    return out;
  }
  // A package's build step is untrusted code: it runs like a run, with the run's network,
  // under the ceilings' memory and processes.
  sandbox::SandboxSpec spec =
      BaseSpec(config_, config_.ceilings, SandboxUse::kEnvironmentBuild,
               "env-" + build_dir.substr(build_dir.size() - std::min<size_t>(12, build_dir.size())),
               /*network=*/true);
  // Every requirement was checked against run/requirements.h's grammar (no option, path or
  // URL); "--" ends pip's options all the same.
  spec.argv = {"/usr/bin/python3", "-m", "pip", "install", "--target", "/home/user/site",
               "--no-cache-dir",   "--"};
  for (const auto& p : packages) spec.argv.push_back(p);
  spec.env = EnvironmentBuildEnv(config_);
  spec.workspace_dir = ws;
  auto result = runner_->Run(spec);
  if (!result.ok()) {
    out.output = "sandrun: the build sandbox could not start: " + result.error().message;
    return out;
  }
  out.output = result->stdout_text + result->stderr_text;
  if (result->outcome == sandbox::RunOutcome::kWallTimeout) {
    out.output += "\nsandrun: stopped: the build's wall-clock time of " +
                  std::to_string(config_.environment_build_wall_time_s) +
                  " s (environment_build_wall_time_s) reached";
  }
  out.ok = result->outcome == sandbox::RunOutcome::kExited && result->exit_code == 0;
  if (out.ok) {
    // One directory for every distribution of the set: one that overwrote another's files
    // (its modules, its metadata) would hand its code to whoever imports the other.
    if (std::string overwrite =
            storage::FindOverwrites(build_dir + "/" + storage::kEnvironmentSite);
        !overwrite.empty()) {
      out.ok = false;
      out.output += "\nsandrun: refused: " + overwrite +
                    "; an environment whose distributions overwrite each other's files is not "
                    "kept";
    }
  }
  // Found nothing because no index was reachable: say so (pip says only "versions: none").
  if (!out.ok && PipFoundNothing(out.output)) {
    if (std::string note = IndexUnreachableNote(out.output, config_); !note.empty()) {
      out.output += "\n" + note;
    }
  }
  return out;
}

void Engine::PrebuildEnvironments() {
  if (!environments_) return;
  for (const auto& set : PrebuildSets(config_, true)) environments_->Prebuild(set);
}

int Engine::SweepEnvironments() {
  if (!environments_) return 0;
  return static_cast<int>(
      environments_->Evict(static_cast<uint64_t>(config_.environments_max_mb) << 20).size());
}

std::optional<storage::EnvironmentStore::Answer> Engine::FindServingEnvironment(
    const RunRequest& run) const {
  // The markdown plan: the install steps' requirements, as a set. Only steps that run as
  // install steps count (one that installs a path runs as a program, whatever is present).
  if (!run.markdown) return std::nullopt;
  std::vector<std::string> wanted;
  for (const auto& step : run.steps) {
    if (!step.save_as.empty() || !IsInstallStep(step)) continue;
    for (auto& r : InstallRequirements(step.code)) wanted.push_back(std::move(r));
  }
  if (wanted.empty()) return std::nullopt;
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  std::vector<std::string> trusted;
  for (const auto& set : PrebuildSets(config_, false)) trusted.push_back(environments_->IdOf(set));
  auto answer = environments_->FindServing(wanted, trusted, RequirementCovered);
  if (answer.outcome != storage::EnvironmentStore::Outcome::kCached) return std::nullopt;
  return answer;
}

std::optional<RunEnd> Engine::AcquireEnvironment(const RunRequest& run, const config::Config& live,
                                                 storage::EnvironmentStore::Answer* answer) {
  using Outcome = storage::EnvironmentStore::Outcome;
  // Building needs the network; without it only what is there (prebuilt) is served.
  const bool may_build = live.network != "off";
  *answer = environments_->Acquire(run.packages, may_build, std::chrono::milliseconds(0));
  bool waited = false;
  if (answer->outcome == Outcome::kBuilding) {
    // Waiting holds a worker thread: only as many as WorkerThreads() counted may.
    WaiterGate::Pass pass = environment_waiters_.Enter(answer->meta.id);
    if (!pass.admitted()) {
      return Building("the environment for " + Joined(run.packages) +
                          " is being built and enough requests wait for it; retry shortly",
                      10);
    }
    *answer = environments_->Acquire(run.packages, may_build,
                                     std::chrono::seconds(live.environment_wait_s));
    waited = true;
  }
  switch (answer->outcome) {
    case Outcome::kCached:
    case Outcome::kBuilt:
      if (waited) answer->outcome = Outcome::kBuilt;
      return std::nullopt;
    case Outcome::kAbsent:
      return Refused(
          Refuse(RefusalCode::kNetworkForbidden,
                 "the environment for " + Joined(run.packages) +
                     " is not prepared on this server, and building it needs the network, which is "
                     "off for runs (config \"network\" is \"off\"); the admin can list the set in "
                     "\"environments_prebuild\"",
                 "packages"));
    case Outcome::kBuilding:
      return Building("the environment for " + Joined(run.packages) + " is still being built (" +
                          std::to_string(live.environment_wait_s) +
                          " s environment_wait_s passed); retry shortly",
                      answer->retry_after_s);
    case Outcome::kBusy:
      return Building("other environments are being built; retry shortly", answer->retry_after_s);
    case Outcome::kFailed:
      return FailedBuild(run, *answer);
  }
  return std::nullopt;
}

std::optional<RunEnd> Engine::PrepareEnvironment(RunRequest* run, const config::Config& live,
                                                 storage::EnvironmentStore::Lease* lease,
                                                 std::optional<EnvironmentReport>* report) {
  if (run->stateful && !run->packages.empty()) {
    return Refused(Refuse(RefusalCode::kConflictingFields,
                          "'packages' does not go with 'stateful' (a kernel does not mount a "
                          "prepared environment); send one of them",
                          "packages"));
  }
  if (!environments_ || run->stateful) return std::nullopt;
  storage::EnvironmentStore::Answer answer;
  if (run->packages.empty()) {
    auto serving = FindServingEnvironment(*run);
    if (!serving) return std::nullopt;
    answer = std::move(*serving);
  } else if (auto refused = AcquireEnvironment(*run, live, &answer)) {
    return refused;
  }
  run->environment_dir = answer.site_dir;
  run->environment_id = answer.meta.id;
  run->environment_packages = answer.meta.packages;
  *report = EnvironmentReport{
      answer.meta.id, answer.meta.packages,
      answer.outcome == storage::EnvironmentStore::Outcome::kBuilt ? "built" : "cached",
      answer.meta.build_ms};
  *lease = std::move(answer.lease);
  return std::nullopt;
}

}  // namespace sandrun::run
