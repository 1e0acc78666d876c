#include "markdown/run_plan.h"

#include <algorithm>
#include <map>

#include "markdown/block_analysis.h"
#include "markdown/fenced_blocks.h"
#include "markdown/file_links.h"
#include "markdown/repeats.h"
#include "markdown/text_util.h"

namespace sandrun::markdown {

std::vector<LanguageAliases> DefaultLanguages() {
  return {{"python", {"python3", "py", "py3"}}, {"bash", {"sh", "shell", "zsh"}}};
}

const char* StepKindName(Step::Kind kind) {
  switch (kind) {
    case Step::Kind::kInstall:
      return "install";
    case Step::Kind::kSetup:
      return "setup";
    case Step::Kind::kMain:
      return "main";
    case Step::Kind::kRun:
      return "run";
    case Step::Kind::kSave:
      return "save";
  }
  return "main";
}

std::string BlockLabel(int index) { return "block " + std::to_string(index + 1); }

namespace {

// A message with this many entries in the no_runnable_code message is summarised after them.
constexpr size_t kMaxListedBlocks = 10;
// Notes on skipped lines in one reason (more are counted), and the bytes of a line quoted.
constexpr size_t kMaxNotes = 3;
constexpr size_t kMaxQuotedLine = 60;

Step::Kind StepKindOf(BlockKind kind) {
  switch (kind) {
    case BlockKind::kInstall:
      return Step::Kind::kInstall;
    case BlockKind::kSetup:
      return Step::Kind::kSetup;
    case BlockKind::kHowTo:
      return Step::Kind::kRun;
    default:
      return Step::Kind::kMain;
  }
}

std::string JoinBlocks(const std::vector<int>& blocks) {
  if (blocks.size() == 1) return BlockLabel(blocks[0]);
  std::string out = "blocks ";
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (i > 0) out += i + 1 == blocks.size() ? " and " : ", ";
    out += std::to_string(blocks[i] + 1);
  }
  return out;
}

std::string Join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

// The first kMaxNotes items, then how many more: a reason stays short whatever the block.
std::string JoinFew(const std::vector<std::string>& items, const char* sep) {
  if (items.size() <= kMaxNotes) return Join(items, sep);
  std::vector<std::string> few(items.begin(), items.begin() + kMaxNotes);
  return Join(few, sep) + " and " + std::to_string(items.size() - kMaxNotes) + " more";
}

std::string SavedReason(const BlockLinks& l) {
  std::string who = BlockLabel(l.user);
  switch (l.why) {
    case SaveReason::kRunBy:
      return "ran as " + l.save_as + " (by " + who + ")";
    case SaveReason::kImportedBy:
      return "saved as " + l.save_as + " (imported by " + who + ")";
    default:
      return "saved as " + l.save_as + " (used by " + who + ")";
  }
}

// The code a shell block runs once the links are known. Lines that cannot work are kept as
// comments, so line numbers in errors still match the message: system package installs, and
// commands naming a file no block provides. In a how-to-run block `cd` is dropped too: saved
// blocks are written to the workspace root, where the command then runs.
class ShellEditor {
 public:
  ShellEditor(const AnalyzedBlock& b, const BlockLinks& links) : b_(b), links_(links) {}

  std::string Edit() {
    std::string code;
    for (const ShellLine& line : b_.shell.lines) code += EditLine(line) + "\n";
    if (more_notes_ > 0) notes_.push_back("and " + std::to_string(more_notes_) + " more skipped");
    return code;
  }
  bool anything_left() const { return kept_ > 0; }
  const std::vector<std::string>& notes() const { return notes_; }
  const std::vector<std::string>& missing() const { return missing_; }

 private:
  std::string EditLine(const ShellLine& line) {
    if (line.kind == LineKind::kEmpty || line.kind == LineKind::kHeredocBody) return line.text;
    if (line.kind == LineKind::kSystemInstall) {
      Note("skipped " + line.commands[0].program + ": system packages cannot be installed");
      return Skip(line.text);
    }
    if (line.kind == LineKind::kInstall || line.kind == LineKind::kRun) {
      for (const ShellCommand& cmd : line.commands) {
        for (const FileRef& ref : cmd.refs) {
          if (links_.resolved.count(ref.file)) continue;
          if (missing_.size() < kMaxNotes &&
              std::find(missing_.begin(), missing_.end(), ref.file) == missing_.end()) {
            missing_.push_back(ref.file);
          }
          Note("skipped '" + Quote(line.text) + "': no earlier block provides " + ref.file);
          return Skip(line.text);
        }
      }
    }
    if (line.kind == LineKind::kRun && b_.kind == BlockKind::kHowTo) return DropCd(line);
    ++kept_;
    if (line.kind == LineKind::kInstall) return DropSudo(line.text);
    return line.text;
  }

  // `sudo pip install x`: sudo cannot work in the sandbox (no privileges to gain) and pip
  // installs to the user site anyway.
  std::string DropSudo(const std::string& text) {
    size_t start = text.find_first_not_of(" \t");
    if (start == std::string::npos || text.compare(start, 5, "sudo ") != 0) return text;
    size_t rest = text.find_first_not_of(' ', start + 5);
    while (rest != std::string::npos && text[rest] == '-') {  // sudo -H, sudo -E
      rest = text.find_first_not_of(' ', text.find(' ', rest));
    }
    if (rest == std::string::npos) return text;
    Note("'sudo' dropped");
    return text.substr(0, start) + text.substr(rest);
  }

  std::string DropCd(const ShellLine& line) {
    std::vector<std::string> kept;
    for (const ShellCommand& cmd : line.commands) {
      if (cmd.kind != CommandKind::kCd)
        kept.push_back(line.text.substr(cmd.begin, cmd.end - cmd.begin));
    }
    if (kept.size() == line.commands.size()) return ++kept_, line.text;
    Note("'cd' dropped: saved blocks are in the workspace directory");
    if (kept.empty()) return Skip(line.text);
    ++kept_;
    return Join(kept, " && ");
  }

  std::string Skip(const std::string& text) {
    size_t indent = text.find_first_not_of(" \t");
    return text.substr(0, indent == std::string::npos ? 0 : indent) + "# (sandrun: skipped) " +
           std::string(Trim(text));
  }

  static std::string Quote(const std::string& line) {
    std::string_view t = Trim(line);
    if (t.size() <= kMaxQuotedLine) return std::string(t);
    return std::string(t.substr(0, kMaxQuotedLine)) + "...";
  }

  // At most kMaxNotes distinct notes, so a block of many skipped lines stays linear and its
  // reason short; the rest are counted.
  void Note(std::string note) {
    if (std::find(notes_.begin(), notes_.end(), note) != notes_.end()) return;
    if (notes_.size() < kMaxNotes) {
      notes_.push_back(std::move(note));
    } else {
      ++more_notes_;
    }
  }

  const AnalyzedBlock& b_;
  const BlockLinks& links_;
  size_t kept_ = 0;
  size_t more_notes_ = 0;
  std::vector<std::string> notes_;
  std::vector<std::string> missing_;
};

// Builds `plan` and the steps from the judged and linked blocks.
class Emitter {
 public:
  Emitter(const std::vector<AnalyzedBlock>& blocks, const std::vector<std::vector<int>>& repeats,
          const std::vector<Superseded>& superseded, const std::vector<BlockLinks>& links,
          const LanguageTable& langs)
      : blocks_(blocks), repeats_(repeats), superseded_(superseded), links_(links), langs_(langs) {}

  RunPlan Run() {
    // The last block saved under each name: an earlier one saved under the same name is
    // overwritten by it before anything runs.
    for (size_t i = 0; i < links_.size(); ++i) {
      const BlockLinks& l = links_[i];
      if (l.save_as.empty()) continue;
      last_saved_[l.save_as] = static_cast<int>(i);
      if (l.why == SaveReason::kRunBy && !blocks_[i].reads_stdin.empty()) {
        stdin_of_runner_.emplace(l.user, StdinText(static_cast<int>(i)));
      }
    }
    for (size_t i = 0; i < blocks_.size(); ++i) EmitBlock(static_cast<int>(i));
    return std::move(out_);
  }

 private:
  void EmitBlock(int i) {
    const AnalyzedBlock& b = blocks_[i];
    const BlockLinks& l = links_[i];
    if (!l.save_as.empty()) {
      if (!b.pip_code.empty()) AddStep(i, langs_.shell(), b.pip_code, Step::Kind::kInstall);
      AddStep(i, b.language, b.code, Step::Kind::kSave, l.save_as);
      const int last = last_saved_.at(l.save_as);
      if (last != i) {
        return AddEntry(
            i, false,
            "superseded by " + BlockLabel(last) + " (a later version of " + l.save_as + ")");
      }
      return AddEntry(i, false, Join(With(SavedReason(l), b.notes), "; "));
    }
    if (b.kind == BlockKind::kNotRunnable) return AddEntry(i, false, b.reason);
    if (!repeats_[i].empty())
      return AddEntry(i, false, "repeats lines of " + JoinBlocks(repeats_[i]));
    if (const Superseded& s = superseded_[i]; s.by >= 0) {
      return AddEntry(i, false,
                      "superseded by " + BlockLabel(s.by) + ", its corrected version (the text " +
                          "before it says \"" + s.word + "\", and it has " +
                          std::to_string(s.shared) + " of this block's " + std::to_string(s.lines) +
                          " lines)");
    }
    if (b.family == kShellFamily) return EmitShell(i);
    if (!b.pip_code.empty()) AddStep(i, langs_.shell(), b.pip_code, Step::Kind::kInstall);
    AddStep(i, b.language, b.code, Step::Kind::kMain);
    out_.steps.back().reads_stdin = StdinText(i);
    AddEntry(i, true, Join(With("main code", b.notes), "; "));
  }

  void EmitShell(int i) {
    const AnalyzedBlock& b = blocks_[i];
    const BlockLinks& l = links_[i];
    ShellEditor editor(b, l);
    std::string code = editor.Edit();
    if (!editor.anything_left()) {
      // A transcript whose command names no file of the answer is what it looked like.
      if (b.transcript) return AddEntry(i, false, "example output");
      std::string why = b.kind == BlockKind::kHowTo && !editor.missing().empty()
                            ? "how-to-run command for " + JoinFew(editor.missing(), ", ") +
                                  ", but no earlier block provides it"
                            : Join(editor.notes(), "; ");
      return AddEntry(i, false, why);
    }
    std::vector<std::string> parts = {ShellReason(b, l)};
    if (b.kind != BlockKind::kHowTo && !l.resolved_order.empty()) parts.push_back(HowText(l));
    for (const std::string& n : b.notes) parts.push_back(n);
    for (const std::string& n : editor.notes()) parts.push_back(n);
    AddStep(i, b.language, code, StepKindOf(b.kind));
    auto runs = stdin_of_runner_.find(i);
    out_.steps.back().reads_stdin = runs != stdin_of_runner_.end() ? runs->second : StdinText(i);
    AddEntry(i, true, Join(parts, "; "));
  }

  static std::string ShellReason(const AnalyzedBlock& b, const BlockLinks& l) {
    switch (b.kind) {
      case BlockKind::kHowTo:
        return "how-to-run command for " + JoinFew(l.resolved_order, ", ") + " (" + HowText(l) +
               ")";
      case BlockKind::kInstall:
        return "install step";
      case BlockKind::kSetup:
        return "setup step (writes " + JoinFew(b.shell.writes, ", ") + ")";
      default:
        return "main code";
    }
  }

  // What the block's commands run: "runs block 0 saved as app.py; ...".
  static std::string HowText(const BlockLinks& l) {
    std::vector<std::string> how;
    for (size_t k = 0; k < l.resolved_order.size() && k < kMaxNotes; ++k) {
      how.push_back(l.resolved.at(l.resolved_order[k]));
    }
    if (l.resolved_order.size() > kMaxNotes) {
      how.push_back("and " + std::to_string(l.resolved_order.size() - kMaxNotes) + " more");
    }
    return Join(how, "; ");
  }

  static std::vector<std::string> With(std::string first, const std::vector<std::string>& rest) {
    std::vector<std::string> out{std::move(first)};
    out.insert(out.end(), rest.begin(), rest.end());
    return out;
  }

  std::string StdinText(int i) const {
    const std::string& what = blocks_[i].reads_stdin;
    return what.empty() ? what : what + " of " + BlockLabel(i);
  }

  void AddStep(int i, const std::string& language, const std::string& code, Step::Kind kind,
               const std::string& save_as = {}) {
    out_.steps.push_back({i, language, code, save_as, kind, {}});
  }

  void AddEntry(int i, bool run, std::string reason) {
    out_.plan.push_back({i, blocks_[i].language, run, std::move(reason)});
  }

  const std::vector<AnalyzedBlock>& blocks_;
  const std::vector<std::vector<int>>& repeats_;
  const std::vector<Superseded>& superseded_;
  const std::vector<BlockLinks>& links_;
  const LanguageTable& langs_;
  std::map<std::string, int> last_saved_;       // save_as -> the last block saved under it
  std::map<int, std::string> stdin_of_runner_;  // block -> StdinText of a saved block it runs
  RunPlan out_;
};

std::string DescribeBlock(const PlanEntry& e) {
  std::string lang = e.language.empty() ? "untagged" : e.language;
  return BlockLabel(e.index) + " (" + lang + "): " + e.reason;
}

Error NoRunnableCode(const std::vector<PlanEntry>& plan) {
  if (plan.empty()) {
    return MakeError(ErrorKind::kNoRunnableCode,
                     "the message has no fenced code block (```python ... ```) to run");
  }
  std::string msg = "no runnable code block in the message; found " + std::to_string(plan.size()) +
                    (plan.size() == 1 ? " code block: " : " code blocks: ");
  for (size_t i = 0; i < plan.size() && i < kMaxListedBlocks; ++i) {
    msg += (i ? "; " : "") + DescribeBlock(plan[i]);
  }
  if (plan.size() > kMaxListedBlocks) {
    msg += "; and " + std::to_string(plan.size() - kMaxListedBlocks) + " more";
  }
  return MakeError(ErrorKind::kNoRunnableCode, msg);
}

// `block` given: that block alone runs, as written (prompts stripped, pip lines first).
Result<RunPlan> SelectedPlan(const std::vector<AnalyzedBlock>& blocks, int block,
                             const LanguageTable& langs) {
  const AnalyzedBlock& b = blocks[block];
  if (b.kind == BlockKind::kNotRunnable) {
    std::string lang = b.language.empty() ? "untagged" : b.language;
    return MakeError(ErrorKind::kBadBlock,
                     BlockLabel(block) + " (" + lang + ") cannot run: " + b.reason);
  }
  RunPlan out;
  for (size_t i = 0; i < blocks.size(); ++i) {
    bool chosen = static_cast<int>(i) == block;
    out.plan.push_back(
        {static_cast<int>(i), blocks[i].language, chosen,
         chosen ? "selected by block" : "not selected (only " + BlockLabel(block) + " runs)"});
  }
  if (!b.pip_code.empty())
    out.steps.push_back({block, langs.shell(), b.pip_code, {}, Step::Kind::kInstall, {}});
  out.steps.push_back({block, b.language, b.code, {}, StepKindOf(b.kind), {}});
  if (!b.reads_stdin.empty())
    out.steps.back().reads_stdin = b.reads_stdin + " of " + BlockLabel(block);
  return out;
}

}  // namespace

Result<RunPlan> BuildRunPlan(std::string_view markdown,
                             const std::vector<LanguageAliases>& languages, int block) {
  if (markdown.size() > kMaxMarkdownBytes) {
    return MakeError(ErrorKind::kTooLarge,
                     "the message is " + std::to_string(markdown.size()) + " bytes; at most " +
                         std::to_string(kMaxMarkdownBytes) + " can be planned");
  }
  std::vector<FencedBlock> fenced = ExtractFencedBlocks(markdown);
  if (fenced.size() > kMaxBlocks) {
    return MakeError(ErrorKind::kTooLarge, "the message has " + std::to_string(fenced.size()) +
                                               " code blocks; at most " +
                                               std::to_string(kMaxBlocks) + " can be planned");
  }
  if (block < kAllBlocks || (block != kAllBlocks && static_cast<size_t>(block) >= fenced.size())) {
    // The request's `block` is a 0-based index, unlike the plan's texts: say so.
    std::string have = fenced.empty() ? "the message has no fenced code block"
                                      : "the message has " + std::to_string(fenced.size()) +
                                            " code blocks; 'block' counts from 0, so 0 to " +
                                            std::to_string(fenced.size() - 1);
    return MakeError(ErrorKind::kBadBlock,
                     "'block' " + std::to_string(block) + " does not exist: " + have);
  }
  LanguageTable langs(languages);
  std::vector<AnalyzedBlock> blocks;
  blocks.reserve(fenced.size());
  for (FencedBlock& f : fenced) blocks.push_back(AnalyzeBlock(std::move(f), langs));
  if (block != kAllBlocks) return SelectedPlan(blocks, block, langs);
  std::vector<std::vector<int>> repeats = FindRepeats(blocks);
  std::vector<Superseded> superseded = FindSuperseded(blocks, repeats);
  // A superseded block provides nothing to later blocks, like an excerpt.
  std::vector<std::vector<int>> inactive = repeats;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (superseded[i].by >= 0) inactive[i] = {superseded[i].by};
  }
  std::vector<BlockLinks> links = LinkBlocks(blocks, inactive);
  RunPlan plan = Emitter(blocks, repeats, superseded, links, langs).Run();
  bool runs = std::any_of(plan.steps.begin(), plan.steps.end(),
                          [](const Step& s) { return s.kind != Step::Kind::kSave; });
  if (!runs) return NoRunnableCode(plan.plan);
  return plan;
}

}  // namespace sandrun::markdown
