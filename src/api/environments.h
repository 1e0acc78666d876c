// Prepared environments in the run pipeline (issue 9 part 4; the store is
// storage/environment_store.h, the Service side api/environments.cc). Pure helpers.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "api/run_codec.h"

namespace sandrun::api {

// `env` (a sandbox environment with a PYTHONPATH line) with the environment's mount point
// appended to PYTHONPATH: after the notebook support directory (its sitecustomize first) and
// the workspace. Pure.
void AddEnvironmentToPath(std::vector<std::string>* env);

// The normalised names of the packages a markdown install step (`code`) asks for. Pure.
std::vector<std::string> InstallStepNames(const std::string& code);

// When every package an install step asks for is in the run's environment
// (run.environment_names), the step's result without running it: status ok, a stdout line
// naming the environment, budget "environment". Otherwise nullopt. Pure.
std::optional<StepResult> SatisfiedByEnvironment(const RunRequest& run, const CodeStep& step,
                                                 int index);

}  // namespace sandrun::api
