// The run plan of an LLM message (DESIGN.md §5): which fenced code blocks run, in what order,
// as what, and why the others do not. Pure: values in, values out; no JSON, HTTP, files or
// processes. Safe to call from any thread; not for the forked child (it allocates).
//
// A message is read like a notebook whose blocks run in order in one workspace. Left out,
// each with a reason a person understands: blocks in a language that is not configured,
// example output, excerpts that repeat lines of an earlier block, and "how to run" commands
// (`python app.py`) whose file an earlier block provides: that block is saved to the file
// instead of being run, and the command runs it in its place, so the code runs once.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace sandrun::markdown {

// A configured language: its name and the info-string words that mean it.
// The planner knows Python (a language named or aliased "python"/"python3") and the shell
// (named or aliased "bash"/"sh"); other configured languages just run as main code.
struct LanguageAliases {
  std::string name;                  // "python"
  std::vector<std::string> aliases;  // "py", "python3", "py3"
};

// python <- python, python3, py, py3; bash <- bash, sh, shell, zsh (DESIGN.md §5).
std::vector<LanguageAliases> DefaultLanguages();

// One entry of `plan`: every fenced block found, run or not, with why.
struct PlanEntry {
  int index = 0;         // 0-based, document order of fenced blocks (texts say index + 1)
  std::string language;  // configured name it runs as ("python", "bash"), else the info
                         // string's first word ("json", "console"), "" when untagged
  bool run = false;      // the block runs as a step of its own; false for a saved block (the
                         // command naming it runs it), even when its `!pip` lines still run
  std::string reason;    // "main code", "install step", "example output", ...
};

// One thing to do, in order, in one workspace.
struct Step {
  enum class Kind {
    kInstall,  // pip installs (a shell block, or a Python block's `!pip` lines)
    kSetup,    // a shell block that writes files
    kMain,     // the code
    kRun,      // a how-to-run command that runs a saved block (`python app.py`)
    kSave,     // write `code` to `save_as`; runs nothing
  };
  int block_index = 0;   // the block it comes from; a block can give two steps (pip + code)
  std::string language;  // configured language name ("python", "bash"); for kSave the block's
                         // `plan` language, which may be "" or not configured: nothing runs it
  std::string code;      // program text (or file content for kSave)
  std::string save_as;   // kSave only: workspace-relative path, already checked safe
  Kind kind = Kind::kMain;
  // What of the step visibly reads standard input, for people ("input() on line 4 of block
  // 2"; for kRun, of the saved block it runs); "" when nothing does.
  std::string reads_stdin;
};

// "install", "setup", "main", "run", "save".
const char* StepKindName(Step::Kind kind);

// "block 3" for the block at 0-based `index`: every text of the plan (reasons, errors) counts
// blocks from 1, as a person reading the message does; the API's `index` and `block` fields
// stay 0-based (DESIGN.md §5).
std::string BlockLabel(int index);

struct RunPlan {
  std::vector<PlanEntry> plan;  // one per fenced block, by index
  std::vector<Step> steps;      // at least one step that is not kSave
};

// Bounds on the work (DESIGN.md §8). A 1 MB message is planned in milliseconds; larger
// messages are refused rather than parsed.
inline constexpr size_t kMaxMarkdownBytes = 4 << 20;
inline constexpr size_t kMaxBlocks = 5000;

inline constexpr int kAllBlocks = -1;

// The pip lines of a Python program, as models write them (`!pip install x`, `%pip install
// x`, `pip install x`): `code` keeps each as a comment (so traceback line numbers still
// match) and drops `%matplotlib` lines the same way; `pip_code` holds the pip lines as shell
// commands, "" when there are none; `matplotlib_magic` says a `%matplotlib` line was dropped.
// Used for a markdown Python block and for a Python program sent as `code`.
struct PipSplit {
  std::string code;
  std::string pip_code;
  bool matplotlib_magic = false;
};
PipSplit SplitPipLines(std::string_view python_code);

// Builds the run plan of `markdown`. `languages` are the configured languages; `block` is
// kAllBlocks, or the 0-based index of the one block to run (it then runs alone, with reason
// "selected by block"; the others are listed as not selected).
//
// Errors (Error::kind; the message is for people):
//   kNoRunnableCode  nothing runs; the message lists the blocks found and why each is left out
//   kBadBlock        `block` is out of range, or the chosen block cannot run (says why)
//   kTooLarge        more than kMaxMarkdownBytes bytes or kMaxBlocks fenced blocks
// Throws nothing but std::bad_alloc.
Result<RunPlan> BuildRunPlan(std::string_view markdown,
                             const std::vector<LanguageAliases>& languages, int block = kAllBlocks);

}  // namespace sandrun::markdown
