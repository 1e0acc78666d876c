// Prepared environments in the run pipeline (the store is
// storage/environment_store.h, the engine side run/environments.cc). Pure helpers.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "run/run_request.h"

namespace sandrun::run {

// `env` (a sandbox environment with a PYTHONPATH line) with the environment's mount point
// appended to PYTHONPATH: after the notebook support directory (its sitecustomize first) and
// the workspace. Pure.
void AddEnvironmentToPath(std::vector<std::string>* env);

// The sets of config `environments_prebuild` that parse, normalised (NormalizeSet); a set
// with an entry that does not parse is left out, and said on stderr when `log`.
std::vector<std::vector<std::string>> PrebuildSets(const config::Config& config, bool log);

// When every requirement of an install step (run/install_step.h) is covered by the set of
// the run's environment (run.environment_packages, RequirementCovered), the step's result
// without running it: status ok, a stdout line naming the environment, budget
// "environment". Otherwise nullopt. Pure.
std::optional<StepResult> SatisfiedByEnvironment(const RunRequest& run, const CodeStep& step,
                                                 int index);

}  // namespace sandrun::run
