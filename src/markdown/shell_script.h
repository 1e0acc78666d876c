// What the lines of a shell block do, as far as the run plan cares: install Python packages,
// install system packages, only run a file ("how to run" lines), write files (setup), or
// anything else. This is a word splitter with quotes, operators, redirections and heredocs,
// not a shell: lines it does not understand are kOther and simply run.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sandrun::markdown {

enum class CommandKind {
  kInstall,        // pip install ..., python -m pip install ...
  kSystemInstall,  // apt-get, yum, brew, conda, ...: cannot work in the sandbox
  kRunFile,        // python app.py, bash x.sh, sh x.sh, source x.sh, ./x.sh
  kChmod,          // chmod +x x.sh
  kCd,             // cd dir
  kOther,
};

// A file a command needs: the script it runs, the file it chmods, or a requirements file.
struct FileRef {
  std::string file;           // safe relative path, "./" removed
  std::string_view family;    // kPythonFamily, kShellFamily or "" (any language)
  bool requirements = false;  // `pip install -r FILE`: any block language may provide it
};

struct ShellCommand {
  CommandKind kind = CommandKind::kOther;
  size_t begin = 0;  // byte range of the command in its line
  size_t end = 0;
  std::string program;             // first word after sudo/env, e.g. "apt-get"
  std::vector<std::string> words;  // all its words, quotes removed, redirections left out
  std::vector<FileRef> refs;
  std::vector<std::string> writes;  // files written by `>`, `>>` or tee (not /dev/*, not &N)
  bool heredoc = false;             // it reads a heredoc
};

enum class LineKind {
  kEmpty,          // blank or comment only
  kHeredocBody,    // inside a heredoc, including its closing delimiter
  kInstall,        // pip installs, possibly with run/chmod/cd commands
  kSystemInstall,  // only system package manager commands
  kRun,            // only run-file, chmod and cd commands
  kOther,
};

struct ShellLine {
  std::string text;
  LineKind kind = LineKind::kEmpty;
  std::vector<ShellCommand> commands;
};

struct ShellScript {
  std::vector<ShellLine> lines;
  std::vector<std::string> writes;  // files written by kOther commands (setup), unique, in order
};

// Splits `code` into lines and classifies each. Linear in the size of `code`.
ShellScript AnalyzeShell(std::string_view code);

}  // namespace sandrun::markdown
