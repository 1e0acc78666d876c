#include "run/run_displays.h"

#include "python/support_files.h"
#include "sandbox/spec.h"
#include "storage/outputs.h"

namespace sandrun::run {
namespace {

constexpr char kManifestName[] = "displays.jsonl";
// The manifest holds at most ManifestBounds::max_text_bytes of text plus a line per entry.
constexpr size_t kMaxManifestBytes = 2 << 20;

}  // namespace

std::vector<std::string> NotebookEnv(const config::Config& config) {
  return {
      std::string("SANDRUN_OUTPUTS=") + sandbox::kOutputsInside,
      "SANDRUN_MAX_FIGURES=" + std::to_string(config.max_figures),
      "SANDRUN_FIGURE_MAX_DPI=" + std::to_string(config.figure_max_dpi),
      "SANDRUN_FIGURE_MAX_PIXELS=" + std::to_string(config.figure_max_pixels),
  };
}

DisplayManifest ReadDisplayManifest(const std::string& outputs_dir, const config::Config& config,
                                    std::string* note) {
  bool truncated = false;
  auto text = storage::ReadOutputFile(outputs_dir, kManifestName, kMaxManifestBytes, &truncated);
  if (!text.ok()) {
    *note = "sandrun: displays left out: the display manifest could not be read: " +
            text.error().message;
    return {};
  }
  ManifestBounds bounds;
  bounds.max_figures = static_cast<size_t>(config.max_figures);
  DisplayManifest manifest = DecodeDisplayManifest(*text, bounds);
  if (truncated) ++manifest.dropped;
  if (manifest.dropped > 0) {
    *note = "sandrun: " + std::to_string(manifest.dropped) +
            " displays left out (malformed, or over the bounds of " +
            std::to_string(bounds.max_entries) + " entries and " +
            std::to_string(bounds.max_text_bytes) + " bytes of tables and text)";
  }
  return manifest;
}

storage::ExtraSource PlanOutputFiles(const std::string& outputs_dir,
                                     const DisplayManifest& manifest,
                                     const std::vector<storage::FoundFile>& walked,
                                     uint64_t max_file_bytes,
                                     std::map<std::string, std::string>* paths,
                                     std::vector<storage::SkippedFile>* skipped) {
  storage::ExtraSource extra;
  extra.dir = outputs_dir;
  const std::vector<std::string> names = OutputFileNames(manifest);
  if (names.empty()) return extra;
  auto scan = storage::ScanOutputFiles(outputs_dir, names, max_file_bytes);
  if (!scan.ok()) return extra;  // no outputs area: nothing was shown
  for (auto& s : scan->skipped) skipped->push_back(std::move(s));
  std::vector<std::string> workspace_paths;
  workspace_paths.reserve(walked.size());
  for (const auto& f : walked) workspace_paths.push_back(f.path);
  for (auto& file : scan->files) {
    const std::string source = file.path;
    file.path = OutputArtifactPath(source, workspace_paths);
    (*paths)[source] = file.path;
    extra.files.push_back({source, std::move(file)});
  }
  return extra;
}

}  // namespace sandrun::run
