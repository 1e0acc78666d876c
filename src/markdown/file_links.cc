#include "markdown/file_links.h"

#include <algorithm>
#include <set>

#include "markdown/text_util.h"

namespace sandrun::markdown {
namespace {

// More blocks than this naming the same file are not real messages; bounding the list keeps
// every resolution cheap however many commands name the file.
constexpr size_t kMaxProvidersPerName = 16;
// Data blocks checked against later code for their file name (each check scans the code).
constexpr size_t kMaxDataBlocks = 32;

class Linker {
 public:
  Linker(const std::vector<AnalyzedBlock>& blocks, const std::vector<std::vector<int>>& repeats)
      : blocks_(blocks), repeats_(repeats), links_(blocks.size()) {}

  std::vector<BlockLinks> Run() {
    for (size_t j = 0; j < blocks_.size(); ++j) {
      int i = static_cast<int>(j);
      if (Active(i) && blocks_[j].family == kShellFamily) ResolveCommands(i);
      Register(i);
    }
    SaveImportedModules();
    SaveDataFiles();
    return std::move(links_);
  }

 private:
  // Runnable and not an excerpt.
  bool Active(int i) const {
    return blocks_[i].kind != BlockKind::kNotRunnable && repeats_[i].empty();
  }

  void Save(int i, const std::string& file, SaveReason why, int user) {
    BlockLinks& l = links_[i];
    if (!l.save_as.empty()) return;
    l.save_as = file;
    l.why = why;
    l.user = user;
  }

  void ResolveCommands(int j) {
    const std::vector<std::string>& writes = blocks_[j].shell.writes;
    const std::set<std::string> own(writes.begin(), writes.end());
    for (const ShellLine& line : blocks_[j].shell.lines) {
      if (line.kind != LineKind::kInstall && line.kind != LineKind::kRun) continue;
      for (const ShellCommand& cmd : line.commands) {
        for (const FileRef& ref : cmd.refs) {
          std::string how = Resolve(ref, j, own);
          if (how.empty() || links_[j].resolved.count(ref.file)) continue;
          links_[j].resolved.emplace(ref.file, how);
          links_[j].resolved_order.push_back(ref.file);
        }
      }
    }
  }

  bool Provides(int i, const FileRef& ref) const {
    const AnalyzedBlock& b = blocks_[i];
    const std::string& saved = links_[i].save_as;
    if (!saved.empty() && saved != ref.file) return false;
    if (ref.requirements) return b.kind != BlockKind::kNotRunnable || !b.example_output;
    if (b.kind == BlockKind::kNotRunnable) return false;
    return ref.family.empty() || b.family == ref.family;
  }

  // What provides `ref` to block j, saving the providing block; "" when nothing does.
  // `own`: the files block j itself writes.
  std::string Resolve(const FileRef& ref, int j, const std::set<std::string>& own) {
    const std::string& f = ref.file;
    const std::string verb = ref.requirements ? "uses " : "runs ";
    if (own.count(f)) return verb + f + " written by this block";
    int provider = -1;
    if (auto it = named_.find(f); it != named_.end()) {
      for (int i : it->second) {
        if (!Provides(i, ref)) continue;
        Save(i, f, ref.requirements ? SaveReason::kUsedBy : SaveReason::kRunBy, j);
        provider = i;
      }
    }
    if (provider < 0 && written_.count(f)) {
      return verb + f + " written by " + BlockLabel(written_[f]);
    }
    // The single earlier block of that language with no other name ("Run it with
    // `python app.py`" after the only Python block).
    if (provider < 0 && !ref.requirements && !ref.family.empty()) {
      const std::vector<int>& unnamed = unnamed_main_[std::string(ref.family)];
      if (unnamed.size() == 1 && Provides(unnamed[0], ref)) {
        provider = unnamed[0];
        Save(provider, f, SaveReason::kRunBy, j);
      }
    }
    if (provider < 0) return {};
    return verb + BlockLabel(provider) + " saved as " + f;
  }

  // Makes block i available to the commands of later blocks.
  void Register(int i) {
    const AnalyzedBlock& b = blocks_[i];
    bool active = Active(i);
    if (!active && (b.example_output || !repeats_[i].empty())) return;
    if (!b.hint.empty()) {
      std::vector<int>& list = named_[b.hint];
      if (list.size() < kMaxProvidersPerName) list.push_back(i);
    }
    if (!active) return;
    for (const std::string& w : b.shell.writes) written_[w] = i;
    if (b.kind == BlockKind::kMain && b.hint.empty() && !b.family.empty()) {
      std::vector<int>& list = unnamed_main_[std::string(b.family)];
      if (list.size() < 2) list.push_back(i);
    }
  }

  // A named Python block (`helper.py`) that a later Python block imports (`import helper`) is
  // a module, not a program: it is saved, not run.
  void SaveImportedModules() {
    std::map<std::string, std::vector<int>> importers;
    for (size_t k = 0; k < blocks_.size(); ++k) {
      if (!Active(static_cast<int>(k)) || blocks_[k].family != kPythonFamily) continue;
      for (const std::string& m : blocks_[k].imports) {
        std::vector<int>& list = importers[m];
        if (list.empty() || list.back() != static_cast<int>(k)) list.push_back(static_cast<int>(k));
      }
    }
    for (size_t i = 0; i < blocks_.size(); ++i) {
      const AnalyzedBlock& b = blocks_[i];
      if (!Active(static_cast<int>(i)) || b.family != kPythonFamily || b.hint.empty()) continue;
      if (b.hint.find('/') != std::string::npos) continue;
      auto it = importers.find(b.hint.substr(0, b.hint.size() - 3));
      if (it == importers.end()) continue;
      auto later = std::upper_bound(it->second.begin(), it->second.end(), static_cast<int>(i));
      if (later != it->second.end())
        Save(static_cast<int>(i), b.hint, SaveReason::kImportedBy, *later);
    }
  }

  // A named data block ("Save this as `data.csv`:") that later code reads is saved to its file,
  // unless earlier code mentions the name (then the file is that code's output, and the block
  // shows what it looks like) or a runnable block provides it.
  void SaveDataFiles() {
    size_t checked = 0;
    for (size_t i = 0; i < blocks_.size() && checked < kMaxDataBlocks; ++i) {
      const AnalyzedBlock& b = blocks_[i];
      if (b.kind != BlockKind::kNotRunnable || b.example_output || b.hint.empty()) continue;
      if (Trim(b.code).empty()) continue;
      if (!links_[i].save_as.empty() || !FamilyOfExtension(FileExtension(b.hint)).empty()) continue;
      if (written_.count(b.hint)) continue;
      ++checked;
      int user = FirstMention(b.hint, static_cast<int>(i));
      if (user > static_cast<int>(i)) Save(static_cast<int>(i), b.hint, SaveReason::kUsedBy, user);
    }
  }

  // The first active block whose code or name mentions `file`, skipping `self`; -1 if none.
  int FirstMention(const std::string& file, int self) const {
    for (size_t k = 0; k < blocks_.size(); ++k) {
      if (static_cast<int>(k) == self || !Active(static_cast<int>(k))) continue;
      if (blocks_[k].hint == file) return -1;
      if (blocks_[k].code.find(file) != std::string::npos) return static_cast<int>(k);
    }
    return -1;
  }

  const std::vector<AnalyzedBlock>& blocks_;
  const std::vector<std::vector<int>>& repeats_;
  std::vector<BlockLinks> links_;
  std::map<std::string, std::vector<int>> named_;         // hint -> blocks, document order
  std::map<std::string, int> written_;                    // file -> setup block writing it
  std::map<std::string, std::vector<int>> unnamed_main_;  // family -> first two unnamed blocks
};

}  // namespace

std::vector<BlockLinks> LinkBlocks(const std::vector<AnalyzedBlock>& blocks,
                                   const std::vector<std::vector<int>>& repeats) {
  return Linker(blocks, repeats).Run();
}

}  // namespace sandrun::markdown
