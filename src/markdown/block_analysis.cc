#include "markdown/block_analysis.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "markdown/text_util.h"

namespace sandrun::markdown {

LanguageTable::LanguageTable(const std::vector<LanguageAliases>& languages)
    : languages_(languages) {
  for (const LanguageAliases& lang : languages) {
    auto is = [&](std::string_view word) {
      return ToLower(lang.name) == word ||
             std::any_of(lang.aliases.begin(), lang.aliases.end(),
                         [&](const std::string& a) { return ToLower(a) == word; });
    };
    if (python_.empty() && (is("python") || is("python3"))) python_ = lang.name;
    if (shell_.empty() && (is("bash") || is("sh"))) shell_ = lang.name;
  }
}

std::string LanguageTable::Find(std::string_view word) const {
  std::string lower = ToLower(word);
  for (const LanguageAliases& lang : languages_) {
    if (ToLower(lang.name) == lower) return lang.name;
    for (const std::string& alias : lang.aliases) {
      if (ToLower(alias) == lower) return lang.name;
    }
  }
  return {};
}

std::string_view LanguageTable::FamilyOf(std::string_view name) const {
  if (!name.empty() && name == python_) return kPythonFamily;
  if (!name.empty() && name == shell_) return kShellFamily;
  return {};
}

namespace {

bool FitsFamily(const std::string& file, std::string_view family) {
  return family.empty() || FamilyOfExtension(FileExtension(file)) == family;
}

// Info string: first word is the language (`{python}` and `.python` as in Pandoc); a file name
// may follow as a word (`python app.py`), an attribute (`title="app.py"`, `filename=app.py`)
// or after a colon in the first word (`python:app.py`).
void ReadInfo(std::string_view info, std::string* tag, std::string* hint) {
  std::vector<std::string_view> words = Words(info);
  if (words.empty()) return;
  std::string_view first = words[0];
  while (!first.empty() && (first.front() == '{' || first.front() == '.')) first.remove_prefix(1);
  while (!first.empty() && first.back() == '}') first.remove_suffix(1);
  size_t colon = first.find(':');
  if (colon != std::string_view::npos) {
    *hint = CleanFileToken(first.substr(colon + 1));
    first = first.substr(0, colon);
  }
  *tag = ToLower(first);
  for (size_t i = 1; i < words.size() && hint->empty(); ++i) {
    std::string_view w = words[i];
    size_t eq = w.find('=');
    if (eq != std::string_view::npos) w = w.substr(eq + 1);
    *hint = CleanFileToken(w);
  }
}

// A first-line comment naming the file: `# app.py`, `# file: app.py`, `// filename: x.js`
// (after a shebang line, if any).
std::string HintFromComment(std::string_view code, std::string_view family) {
  std::vector<std::string_view> lines = SplitLines(code);
  size_t i = 0;
  while (i < lines.size() && IsBlank(lines[i])) ++i;
  if (i < lines.size() && Trim(lines[i]).substr(0, 2) == "#!") ++i;
  if (i >= lines.size()) return {};
  std::string_view t = Trim(lines[i]);
  if (t.substr(0, 2) == "//" || t.substr(0, 2) == "--") {
    t.remove_prefix(2);
  } else if (!t.empty() && t[0] == '#') {
    t.remove_prefix(1);
  } else {
    return {};
  }
  static constexpr std::array<std::string_view, 7> kLabels = {"file", "filename", "name", "path",
                                                              "save", "as",       "in"};
  std::vector<std::string_view> words = Words(t);
  for (size_t k = 0; k < words.size() && k < 4; ++k) {
    std::string file = CleanFileToken(words[k]);
    if (!file.empty()) return FitsFamily(file, family) ? file : std::string();
    std::string label = ToLower(words[k]);
    if (!label.empty() && label.back() == ':') label.pop_back();
    if (std::find(kLabels.begin(), kLabels.end(), label) == kLabels.end()) return {};
  }
  return {};
}

// The name in the sentence just before the block ("Save this as `app.py`:"): the first fitting
// file name of the last sentence, else the last one of the paragraph.
std::string HintFromLead(std::string_view lead, std::string_view family) {
  std::vector<std::string_view> words = Words(lead);
  size_t last_sentence = 0;
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    char end = words[i].back();
    if (end == '.' || end == '!' || end == '?') last_sentence = i + 1;
  }
  std::string fallback;
  for (size_t i = 0; i < words.size(); ++i) {
    std::string file = CleanFileToken(words[i]);
    if (file.empty() || !FitsFamily(file, family)) continue;
    if (i >= last_sentence) return file;
    fallback = file;
  }
  return fallback;
}

bool MentionsOutput(std::string_view lead) {
  std::string lower = ToLower(lead);
  for (std::string_view word : {"output", "prints", "printed", "you should see", "result:"}) {
    if (lower.find(word) != std::string::npos) return true;
  }
  return false;
}

bool IsOutputTag(std::string_view tag) {
  static constexpr std::array<std::string_view, 8> kOutput = {
      "output", "out", "stdout", "stderr", "result", "results", "log", "traceback"};
  return std::find(kOutput.begin(), kOutput.end(), tag) != kOutput.end();
}

bool IsTextTag(std::string_view tag) {
  return tag.empty() || tag == "text" || tag == "txt" || tag == "plaintext" || tag == "plain" ||
         tag == "none";
}

void NotRunnable(AnalyzedBlock* b, std::string reason, bool output = false) {
  b->kind = BlockKind::kNotRunnable;
  b->family = {};
  b->reason = std::move(reason);
  b->example_output = output;
}

void NotRunnableOutputOr(AnalyzedBlock* b, std::string reason) {
  if (MentionsOutput(b->source.lead_text)) {
    NotRunnable(b, "example output", true);
  } else {
    NotRunnable(b, std::move(reason));
  }
}

std::string_view FirstCodeLine(std::string_view code) {
  for (std::string_view line : SplitLines(code)) {
    if (!IsBlank(line)) return Trim(line);
  }
  return {};
}

bool LooksLikePython(std::string_view code) {
  for (std::string_view line : SplitLines(code)) {
    if (line.substr(0, 9) == "Traceback") return false;
  }
  for (std::string_view line : SplitLines(code)) {
    if (IsBlank(line) || Trim(line)[0] == '#') continue;
    for (std::string_view start : {"import ", "def ", "class ", "async def ", "if __name__"}) {
      if (line.substr(0, start.size()) == start) return true;
    }
    return line.substr(0, 5) == "from " && line.find(" import ") != std::string_view::npos;
  }
  return false;
}

// A shell script made only of installs and commands that run files (`pip install x`,
// `python app.py`) cannot be mistaken for anything else.
bool LooksLikeShell(std::string_view code) {
  bool any = false;
  for (const ShellLine& line : AnalyzeShell(code).lines) {
    if (line.kind == LineKind::kEmpty) continue;
    if (line.kind != LineKind::kInstall && line.kind != LineKind::kRun) return false;
    any = true;
  }
  return any;
}

void SetLanguage(AnalyzedBlock* b, const LanguageTable& langs, std::string_view family) {
  b->family = family;
  b->language = family == kPythonFamily ? langs.python() : langs.shell();
}

// True when some command of `script` runs a file with arguments after it (`python fib.py 15`).
bool RunsFileWithArguments(const ShellScript& script) {
  for (const ShellLine& line : script.lines) {
    for (const ShellCommand& cmd : line.commands) {
      if (cmd.kind != CommandKind::kRunFile || cmd.refs.empty()) continue;
      std::vector<std::string_view> words =
          Words(std::string_view(line.text).substr(cmd.begin, cmd.end - cmd.begin));
      for (size_t k = 0; k + 1 < words.size(); ++k) {
        std::string_view w = words[k];
        if (w.substr(0, 2) == "./") w.remove_prefix(2);
        if (w == cmd.refs[0].file) return true;
      }
    }
  }
  return false;
}

// A transcript: `$ ` command lines, each only running a file, at least one with arguments,
// then the output they printed. Kept as a how-to-run block of the commands alone, so the file
// the answer gives runs with those arguments (if no block provides it, the plan calls it
// example output after all). False, and `b` unchanged, for anything else.
bool TakeTranscript(AnalyzedBlock* b, const LanguageTable& langs) {
  if (langs.shell().empty()) return false;
  std::string_view first = FirstCodeLine(b->code);
  if (first.substr(0, 2) != "$ ") return false;
  PromptLines p = StripPrompts(b->code, "$ ", "");
  if (p.all_prompts) return false;
  ShellScript script = AnalyzeShell(p.code);
  for (const ShellLine& line : script.lines) {
    if (line.kind != LineKind::kRun && line.kind != LineKind::kEmpty) return false;
  }
  if (!RunsFileWithArguments(script)) return false;
  SetLanguage(b, langs, kShellFamily);
  b->code = std::move(p.code);
  b->transcript = true;
  b->notes.push_back("its output lines are sample output, not run");
  return true;
}

// Untagged blocks run only as Python or shell, from a shebang, prompts or unmistakable content.
void DetectUntagged(AnalyzedBlock* b, const LanguageTable& langs) {
  std::string_view first = FirstCodeLine(b->code);
  std::string_view family;
  if (first.substr(0, 2) == "#!") {
    if (first.find("python") != std::string_view::npos) {
      family = kPythonFamily;
    } else if (first.find("sh") != std::string_view::npos) {
      family = kShellFamily;
    }
  } else if (PromptLines p = StripPrompts(b->code, "$ ", ""); p.all_prompts) {
    family = kShellFamily;
    b->code = p.code;
  } else if (TakeTranscript(b, langs)) {
    return;
  } else if (PromptLines p = StripPrompts(b->code, ">>> ", "... "); p.all_prompts) {
    family = kPythonFamily;
    b->code = p.code;
  } else if (LooksLikePython(b->code)) {
    family = kPythonFamily;
  } else if (LooksLikeShell(b->code)) {
    family = kShellFamily;
  }
  const std::string& name = family == kPythonFamily ? langs.python() : langs.shell();
  if (family.empty() || name.empty()) {
    NotRunnableOutputOr(b, "no language tag, and it does not look like Python or shell");
    return;
  }
  SetLanguage(b, langs, family);
}

// A session transcript in a shell or Python block: runnable when every line has a prompt, or
// (shell) when its commands run a file of the answer with arguments (TakeTranscript).
void StripSessionPrompts(AnalyzedBlock* b, const LanguageTable& langs, std::string_view prompt,
                         std::string_view more) {
  std::string_view first = FirstCodeLine(b->code);
  if (first != Trim(prompt) && first.substr(0, prompt.size()) != prompt) return;
  PromptLines p = StripPrompts(b->code, prompt, more);
  if (p.all_prompts) {
    b->code = p.code;
  } else if (prompt != "$ " || !TakeTranscript(b, langs)) {
    NotRunnable(b, "example output", true);
  }
}

// `!pip install x`, `%pip install x` and bare `pip install x` lines are not Python: they run as
// a shell step before the block. They stay in the code as comments so line numbers in a
// traceback still match the message. `%matplotlib inline` is dropped the same way (MPLBACKEND
// is Agg in the sandbox).
void ExtractPipLines(AnalyzedBlock* b) {
  PipSplit split = SplitPipLines(b->code);
  b->code = std::move(split.code);
  b->pip_code = std::move(split.pip_code);
  if (!b->pip_code.empty()) b->notes.push_back("its pip install lines run first");
  if (split.matplotlib_magic) b->notes.push_back("%matplotlib line commented out");
}

// Top-level modules a Python block imports (`import a.b, c as d`, `from e import f`).
std::vector<std::string> Imports(std::string_view code) {
  std::vector<std::string> modules;
  for (std::string_view line : SplitLines(code)) {
    std::vector<std::string_view> w = Words(Trim(line));
    if (w.size() < 2 || (w[0] != "import" && w[0] != "from")) continue;
    size_t end = w[0] == "from" ? 2 : w.size();
    for (size_t i = 1; i < end; ++i) {
      std::string_view m = w[i];
      if (m == "as") ++i;
      if (m == "as" || m.empty() || m[0] == '.') continue;
      m = m.substr(0, m.find_first_of(".,"));
      if (!m.empty()) modules.emplace_back(m);
    }
  }
  return modules;
}

void PreparePython(AnalyzedBlock* b, const LanguageTable& langs) {
  StripSessionPrompts(b, langs, ">>> ", "... ");
  if (b->kind == BlockKind::kNotRunnable) return;
  if (langs.shell().empty()) return;  // pip lines need a shell to run in
  if (LooksLikeShell(b->code)) {
    // `python app.py` or `pip install x` tagged as python: never valid Python.
    SetLanguage(b, langs, kShellFamily);
    b->notes = {"shell commands in a python block"};
    return;
  }
  ExtractPipLines(b);
  std::vector<std::string_view> lines = SplitLines(b->code);
  bool only_pip = std::all_of(lines.begin(), lines.end(),
                              [](std::string_view l) { return IsBlank(l) || Trim(l)[0] == '#'; });
  if (only_pip && !b->pip_code.empty() && !langs.shell().empty()) {
    // A "python" block holding only pip commands is a mislabelled install block.
    SetLanguage(b, langs, kShellFamily);
    b->code = std::move(b->pip_code);
    b->pip_code.clear();
    b->notes = {"pip commands in a python block"};
    return;
  }
  b->imports = Imports(b->code);
}

}  // namespace

PipSplit SplitPipLines(std::string_view python_code) {
  PipSplit out;
  for (std::string_view line : SplitLines(python_code)) {
    std::string_view t = Trim(line);
    std::string_view rest = t;
    if (!rest.empty() && (rest[0] == '!' || rest[0] == '%')) rest = Trim(rest.substr(1));
    bool pip = rest != t || rest.substr(0, 4) == "pip " || rest.substr(0, 5) == "pip3 ";
    pip = pip && !rest.empty() && AnalyzeShell(rest).lines[0].kind == LineKind::kInstall;
    bool mpl = t.substr(0, 11) == "%matplotlib";
    if (pip || mpl) {
      std::string indent(line.substr(0, line.find_first_not_of(" \t")));
      out.code += indent + "# " + std::string(t) + "\n";
      if (pip) out.pip_code += std::string(rest) + "\n";
      out.matplotlib_magic = out.matplotlib_magic || mpl;
    } else {
      out.code += std::string(line) + "\n";
    }
  }
  return out;
}

BlockKind ShellKind(const ShellScript& script, std::string* reason) {
  size_t install = 0, run = 0, other = 0, system = 0;
  for (const ShellLine& line : script.lines) {
    install += line.kind == LineKind::kInstall;
    run += line.kind == LineKind::kRun;
    other += line.kind == LineKind::kOther;
    system += line.kind == LineKind::kSystemInstall;
  }
  if (install + run + other == 0) {
    *reason =
        system > 0 ? "system package install, which cannot run in the sandbox" : "empty block";
    return BlockKind::kNotRunnable;
  }
  if (!script.writes.empty()) return BlockKind::kSetup;
  if (other > 0) return BlockKind::kMain;
  return install > 0 ? BlockKind::kInstall : BlockKind::kHowTo;
}

namespace {

// Sets language and family from the info string (or the content, when untagged), or marks
// the block not runnable.
void ResolveLanguage(AnalyzedBlock* b, const LanguageTable& langs) {
  b->language = b->tag;
  if (b->tag == "console" || b->tag == "shell-session" || b->tag == "sh-session") {
    PromptLines p = StripPrompts(b->code, "$ ", "");
    if (!p.all_prompts) {
      if (!TakeTranscript(b, langs)) NotRunnable(b, "example output", true);
    } else if (langs.shell().empty()) {
      NotRunnable(b, "shell commands, but no shell language is configured");
    } else {
      SetLanguage(b, langs, kShellFamily);
      b->code = p.code;
    }
    return;
  }
  if (b->tag.empty()) return DetectUntagged(b, langs);
  std::string configured = langs.Find(b->tag);
  if (!configured.empty()) {
    b->language = configured;
    b->family = langs.FamilyOf(configured);
    return;
  }
  std::string why = "language '" + b->tag + "' is not runnable";
  if (IsOutputTag(b->tag)) {
    NotRunnable(b, "example output", true);
  } else if (IsTextTag(b->tag)) {
    NotRunnableOutputOr(b, why);
  } else {
    NotRunnable(b, why);
  }
}

bool IsWhitespace(std::string_view code) {
  return code.find_first_not_of(" \t\n") == std::string_view::npos;
}

}  // namespace

namespace {

bool IsIdentifierChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}

// `name(` in `line` as a call of that name, not of `x.name(` or `myname(`.
bool Calls(std::string_view line, std::string_view name) {
  for (size_t at = line.find(name); at != std::string_view::npos; at = line.find(name, at + 1)) {
    if (at > 0 && IsIdentifierChar(line[at - 1])) continue;
    std::string_view rest = Trim(line.substr(at + name.size()));
    if (!rest.empty() && rest[0] == '(') return true;
  }
  return false;
}

}  // namespace

std::string StdinReader(std::string_view code, std::string_view family) {
  if (family == kShellFamily) {
    ShellScript script = AnalyzeShell(code);
    for (size_t n = 0; n < script.lines.size(); ++n) {
      for (const ShellCommand& cmd : script.lines[n].commands) {
        if (cmd.program == "read") return "read on line " + std::to_string(n + 1);
      }
    }
    return {};
  }
  if (family != kPythonFamily) return {};
  size_t n = 0;
  for (std::string_view line : SplitLines(code)) {
    ++n;
    std::string_view t = Trim(line);
    if (t.empty() || t[0] == '#') continue;
    if (Calls(t, "input")) return "input() on line " + std::to_string(n);
    if (t.find("sys.stdin") != std::string_view::npos) {
      return "sys.stdin on line " + std::to_string(n);
    }
  }
  return {};
}

AnalyzedBlock AnalyzeBlock(FencedBlock source, const LanguageTable& langs) {
  AnalyzedBlock b;
  b.source = std::move(source);
  b.code = b.source.code;
  b.kind = BlockKind::kMain;
  ReadInfo(b.source.info, &b.tag, &b.hint);
  ResolveLanguage(&b, langs);
  if (b.family == kPythonFamily) PreparePython(&b, langs);
  if (b.family == kShellFamily) StripSessionPrompts(&b, langs, "$ ", "");
  if (b.kind != BlockKind::kNotRunnable && IsWhitespace(b.code)) NotRunnable(&b, "empty block");
  if (b.kind != BlockKind::kNotRunnable && b.family == kShellFamily) {
    b.shell = AnalyzeShell(b.code);
    b.kind = ShellKind(b.shell, &b.reason);
  }
  if (b.hint.empty()) b.hint = HintFromComment(b.code, b.family);
  if (b.hint.empty()) b.hint = HintFromLead(b.source.lead_text, b.family);
  if (!FitsFamily(b.hint, b.family)) b.hint.clear();
  if (b.kind != BlockKind::kNotRunnable) b.reads_stdin = StdinReader(b.code, b.family);
  return b;
}

}  // namespace sandrun::markdown
