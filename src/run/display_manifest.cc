#include "run/display_manifest.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <set>

#include "run/run_request.h"

namespace sandrun::run {
namespace {

constexpr size_t kMaxOutputNameBytes = 128;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool ValidOutputName(const std::string& name) {
  if (name.empty() || name.size() > kMaxOutputNameBytes || name[0] == '.') return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  for (const char* ext : {".png", ".jpg", ".jpeg", ".gif", ".webp"}) {
    if (EndsWith(name, ext)) return true;
  }
  return false;
}

bool IsRasterMime(const std::string& mime) {
  return mime == "image/png" || mime == "image/jpeg" || mime == "image/gif" || mime == "image/webp";
}

// The string member `name` of `v`, or "" when absent or not a string.
std::string Member(const rapidjson::Value& v, const char* name) {
  auto it = v.FindMember(name);
  if (it == v.MemberEnd() || !it->value.IsString()) return "";
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

// Decodes one line into `out` (an entry) or `skipped`; false when the line is not valid.
bool DecodeLine(const std::string& line, size_t text_budget, const ManifestBounds& bounds,
                ManifestEntry* out, storage::SkippedFile* skipped) {
  rapidjson::Document doc;
  // kParseStopWhenDoneFlag is not set: trailing garbage on the line makes it invalid.
  doc.Parse<rapidjson::kParseNoFlags>(line.data(), line.size());
  if (doc.HasParseError() || !doc.IsObject()) return false;
  if (doc.HasMember("skipped")) {
    skipped->path = Member(doc, "skipped");
    skipped->reason = Member(doc, "reason");
    return ValidOutputName(skipped->path) && skipped->reason == kTooManyFigures;
  }
  out->kind = Member(doc, "kind");
  if (out->kind == kDisplayImage) {
    out->output_file = Member(doc, "file");
    out->workspace_file = Member(doc, "workspace_file");
    if (!out->output_file.empty()) {
      return out->workspace_file.empty() && ValidOutputName(out->output_file);
    }
    return !out->workspace_file.empty() && CheckRelativePath(out->workspace_file).empty();
  }
  if (out->kind == kDisplayTable || out->kind == kDisplayText) {
    out->mime = Member(doc, "mime");
    out->text = Member(doc, "text");
    const bool mime_ok =
        out->mime == "text/markdown" || (out->kind == kDisplayText && out->mime == "text/plain");
    return mime_ok && !out->text.empty() && out->text.size() <= bounds.max_entry_text_bytes &&
           out->text.size() <= text_budget;
  }
  return false;
}

}  // namespace

DisplayManifest DecodeDisplayManifest(const std::string& text, const ManifestBounds& bounds) {
  DisplayManifest manifest;
  size_t text_used = 0;
  std::set<std::string> figures;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    if (manifest.entries.size() + manifest.skipped.size() >= bounds.max_entries) {
      ++manifest.dropped;
      continue;
    }
    ManifestEntry entry;
    storage::SkippedFile skipped;
    if (!DecodeLine(line, bounds.max_text_bytes - text_used, bounds, &entry, &skipped)) {
      ++manifest.dropped;
      continue;
    }
    if (!skipped.path.empty()) {
      manifest.skipped.push_back(std::move(skipped));
      continue;
    }
    if (!entry.output_file.empty() && !figures.count(entry.output_file)) {
      // The loader keeps to the cap itself; a program writing the manifest does not have to.
      if (figures.size() == bounds.max_figures) {
        manifest.skipped.push_back({entry.output_file, kTooManyFigures});
        figures.insert(entry.output_file);  // skipped once, however often it is named
        continue;
      }
      figures.insert(entry.output_file);
    }
    if (!entry.output_file.empty() &&
        std::any_of(manifest.skipped.begin(), manifest.skipped.end(),
                    [&](const storage::SkippedFile& s) { return s.path == entry.output_file; })) {
      continue;  // named again after it was skipped
    }
    text_used += entry.text.size();
    manifest.entries.push_back(std::move(entry));
  }
  return manifest;
}

std::vector<std::string> OutputFileNames(const DisplayManifest& manifest) {
  std::vector<std::string> names;
  for (const auto& e : manifest.entries) {
    if (!e.output_file.empty() &&
        std::find(names.begin(), names.end(), e.output_file) == names.end()) {
      names.push_back(e.output_file);
    }
  }
  return names;
}

std::vector<std::string> WorkspaceFileNames(const DisplayManifest& manifest) {
  std::vector<std::string> names;
  for (const auto& e : manifest.entries) {
    if (!e.workspace_file.empty() &&
        std::find(names.begin(), names.end(), e.workspace_file) == names.end()) {
      names.push_back(e.workspace_file);
    }
  }
  return names;
}

std::string OutputArtifactPath(const std::string& name,
                               const std::vector<std::string>& workspace_paths) {
  auto collides = [&](const std::string& path) {
    for (const std::string& w : workspace_paths) {
      if (w == path || w.rfind(path + "/", 0) == 0 || path.rfind(w + "/", 0) == 0) return true;
    }
    return false;
  };
  if (!collides(name)) return name;
  for (size_t n = 1;; ++n) {
    const std::string dir = n == 1 ? "shown" : "shown-" + std::to_string(n);
    if (!collides(dir + "/" + name)) return dir + "/" + name;
  }
}

std::vector<Display> AssembleDisplays(const DisplayManifest& manifest,
                                      const std::map<std::string, std::string>& output_paths,
                                      const std::vector<storage::ArtifactFile>& published) {
  std::vector<Display> displays;
  for (const auto& e : manifest.entries) {
    if (e.kind != kDisplayImage) {
      displays.push_back({e.kind, e.mime, e.text, std::nullopt});
      continue;
    }
    std::string path = e.workspace_file;
    if (!e.output_file.empty()) {
      auto it = output_paths.find(e.output_file);
      if (it == output_paths.end()) continue;
      path = it->second;
    }
    auto file = std::find_if(published.begin(), published.end(),
                             [&](const storage::ArtifactFile& f) { return f.path == path; });
    if (file == published.end() || !IsRasterMime(file->mime)) continue;
    displays.push_back({kDisplayImage, file->mime, std::nullopt, *file});
  }
  return displays;
}

}  // namespace sandrun::run
