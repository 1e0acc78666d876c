// Notebook display in a run, the daemon's side: the sandbox's environment for
// src/python/sitecustomize.py, and after the run, the outputs area read back into files to
// publish and the response's `displays`. Used by the engine (engine.cc) only.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "config/config.h"
#include "run/display_manifest.h"
#include "storage/artifact_store.h"
#include "storage/export.h"

namespace sandrun::run {

// PYTHONPATH first entry (the support files) and the SANDRUN_* variables sitecustomize reads:
// the outputs area and the figure caps of `config`.
std::vector<std::string> NotebookEnv(const config::Config& config);

// Reads and decodes the display manifest of the outputs area `outputs_dir` (host path). A
// missing manifest is empty; one that cannot be read, or whose lines were left out, adds a
// line to `note` (for stderr). Not safe after fork.
DisplayManifest ReadDisplayManifest(const std::string& outputs_dir, const config::Config& config,
                                    std::string* note);

// The manifest's output files, as published beside the workspace files `walked` (artifact
// paths picked by OutputArtifactPath, recorded in `paths`, name -> path); files that are
// symlinks, not regular or over `max_file_bytes` go to `skipped`. Not safe after fork.
storage::ExtraSource PlanOutputFiles(const std::string& outputs_dir,
                                     const DisplayManifest& manifest,
                                     const std::vector<storage::FoundFile>& walked,
                                     uint64_t max_file_bytes,
                                     std::map<std::string, std::string>* paths,
                                     std::vector<storage::SkippedFile>* skipped);

}  // namespace sandrun::run
