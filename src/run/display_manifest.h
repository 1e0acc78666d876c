// The display manifest of a run: what src/python/sitecustomize.py wrote to the
// outputs area, one JSON object per line, read back by the daemon after the run. The program
// could have written anything there, so every line is checked and bounded here, and only the
// files it names are published. Pure functions: no I/O.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "run/displays.h"
#include "storage/artifact_store.h"
#include "storage/export.h"

namespace sandrun::run {

// Lines of the manifest, as the loader writes them:
//   {"kind": "image", "mime": "image/png", "file": "figure-1.png"}   a file of the outputs area
//   {"kind": "image", "workspace_file": "plots/chart.png"}            a file the program saved
//   {"kind": "table", "mime": "text/markdown", "text": "| a |..."}
//   {"kind": "text", "mime": "text/markdown" or "text/plain", "text": "..."}
//   {"skipped": "figure-21.png", "reason": "too_many_figures"}
struct ManifestEntry {
  std::string kind;            // kDisplayImage, kDisplayTable or kDisplayText
  std::string mime;            // tables and text: text/markdown or text/plain
  std::string text;            // tables and text
  std::string output_file;     // image from the outputs area: a plain name (figure-1.png)
  std::string workspace_file;  // image the program saved: a workspace-relative path
};

struct DisplayManifest {
  std::vector<ManifestEntry> entries;         // in the order shown
  std::vector<storage::SkippedFile> skipped;  // too_many_figures (the loader's and the cap's)
  size_t dropped = 0;  // lines left out: not JSON, unknown shape, bad name, over a bound
};

struct ManifestBounds {
  size_t max_figures = 20;                  // distinct output files; more: skipped too_many_figures
  size_t max_entries = 1000;                // lines kept (skipped lines included)
  size_t max_text_bytes = 1 << 20;          // text of all tables and texts together
  size_t max_entry_text_bytes = 256 << 10;  // one table or text
};

// files_skipped reason of a figure or image past max_figures (config key max_figures).
inline constexpr char kTooManyFigures[] = "too_many_figures";

// Decodes the manifest's lines (invalid UTF-8 is replaced later, when encoded). An output
// file name is one path component of [A-Za-z0-9._-] (not starting with '.') ending in .png,
// .jpg, .jpeg, .gif or .webp, at most 128 bytes; a workspace file passes CheckRelativePath.
// Lines that fail a check are counted in `dropped`. Never fails.
DisplayManifest DecodeDisplayManifest(const std::string& text, const ManifestBounds& bounds);

// The distinct output file names the entries refer to, in order of first mention.
std::vector<std::string> OutputFileNames(const DisplayManifest& manifest);
// The distinct workspace files the entries refer to, in order of first mention.
std::vector<std::string> WorkspaceFileNames(const DisplayManifest& manifest);

// The artifact path of the output file `name` (a figure) published beside the workspace files
// `workspace_paths` (sorted, as WalkWorkspace lists them): `name` itself, else "shown/<name>",
// "shown-2/<name>", ... — the first that is not a workspace path, does not lie under one and
// has none under it, so the two never collide in the run's artifact directory.
std::string OutputArtifactPath(const std::string& name,
                               const std::vector<std::string>& workspace_paths);

// The response's displays, in the manifest's order. An image refers to a published file:
// output files through `output_paths` (name -> artifact path), workspace files by their path;
// an image whose file was not published, or is not a PNG, JPEG, GIF or WebP image by its
// content, is left out.
std::vector<Display> AssembleDisplays(const DisplayManifest& manifest,
                                      const std::map<std::string, std::string>& output_paths,
                                      const std::vector<storage::ArtifactFile>& published);

}  // namespace sandrun::run
