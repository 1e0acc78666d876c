// One fenced block judged on its own: which language it runs as (if any), what kind of step
// it is, the code that would run, and the file name the message gives it. The judgements that
// need the other blocks (repeats, how-to-run commands, saved files) are in run_plan.cc.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "markdown/fenced_blocks.h"
#include "markdown/run_plan.h"
#include "markdown/shell_script.h"

namespace sandrun::markdown {

// The configured languages, looked up by info-string word.
class LanguageTable {
 public:
  explicit LanguageTable(const std::vector<LanguageAliases>& languages);
  // Configured name for a word (name or alias, case-insensitive); "" if none.
  std::string Find(std::string_view word) const;
  // Configured names of the Python and shell languages, "" when not configured.
  const std::string& python() const { return python_; }
  const std::string& shell() const { return shell_; }
  // kPythonFamily, kShellFamily or "" for a configured name.
  std::string_view FamilyOf(std::string_view name) const;

 private:
  const std::vector<LanguageAliases>& languages_;
  std::string python_;
  std::string shell_;
};

enum class BlockKind { kNotRunnable, kMain, kInstall, kSetup, kHowTo };

struct AnalyzedBlock {
  FencedBlock source;
  std::string tag;          // first word of the info string, lower case, "" if none
  std::string language;     // for `plan`: the configured name it runs as, else `tag`
  std::string_view family;  // kPythonFamily, kShellFamily, "" (other language or not runnable)
  BlockKind kind = BlockKind::kNotRunnable;
  bool example_output = false;       // not runnable because it shows output
  std::string reason;                // why not runnable (kNotRunnable only)
  std::string code;                  // what would run (prompts stripped, pip lines commented)
  std::string pip_code;              // Python `!pip install` lines, as shell commands
  std::string hint;                  // file name the message gives the block, "" if none
  ShellScript shell;                 // shell blocks only
  std::vector<std::string> imports;  // Python blocks: top-level modules they import
  std::vector<std::string> notes;    // edits made to the code, said in the reason
  // A shell transcript (`$ python fib.py 15` then its output) kept as a how-to-run block: its
  // commands run a file with arguments; the output lines are dropped.
  bool transcript = false;
  // What of the block reads standard input, for people: "input() on line 3", "read on line 2";
  // "" when nothing visibly does.
  std::string reads_stdin;
};

// What in `code` visibly reads standard input, for people, with its 1-based line in `code`:
// "input() on line 3", "sys.stdin on line 5" (family kPythonFamily), "read on line 2"
// (kShellFamily); "" when nothing does (or another family). Comment lines are not looked at.
// Linear in the size of `code`.
std::string StdinReader(std::string_view code, std::string_view family);

// Judges one block. Never fails: a block that cannot run says why in `reason`.
AnalyzedBlock AnalyzeBlock(FencedBlock source, const LanguageTable& languages);

// Kind of a shell script from its lines; kNotRunnable with `reason` when nothing can run.
BlockKind ShellKind(const ShellScript& script, std::string* reason);

}  // namespace sandrun::markdown
