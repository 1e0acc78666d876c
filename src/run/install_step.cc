#include "run/install_step.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <string_view>

#include "markdown/shell_script.h"
#include "markdown/text_util.h"
#include "run/requirements.h"
#include "util/text.h"

namespace sandrun::run {
namespace {

using markdown::CommandKind;
using markdown::LineKind;
using markdown::ShellCommand;
using markdown::ShellLine;

constexpr size_t kMaxQuoted = 60;

// What pip is started as for every install command: the system's interpreter, isolated (-I:
// no user site, no .pth of it, no PYTHONPATH, no working directory on sys.path), installing
// to the user site as the runs' pip configuration says, without the workspace's cache.
constexpr char kPipCommand[] =
    "/usr/bin/python3 -I -m pip install --user --no-cache-dir --no-warn-script-location";

// `text` in quotes, at most kMaxQuoted bytes of it (cut at a character boundary).
std::string Quoted(std::string_view text) {
  if (text.size() <= kMaxQuoted) return "'" + util::SanitizeUtf8(text) + "'";
  size_t cut = kMaxQuoted;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return "'" + util::SanitizeUtf8(text.substr(0, cut)) + "...'";
}

// Options that change only pip's output or its choice among the index's packages.
bool SafeOption(const std::string& word) {
  static const std::set<std::string> kSafe = {"--quiet",
                                              "--verbose",
                                              "--upgrade",
                                              "--user",
                                              "--pre",
                                              "--no-deps",
                                              "--force-reinstall",
                                              "--prefer-binary",
                                              "--no-cache-dir",
                                              "--break-system-packages",
                                              "--disable-pip-version-check",
                                              "--no-warn-script-location",
                                              "--no-input",
                                              "--no-color",
                                              "-q",
                                              "-v",
                                              "-U"};
  if (kSafe.count(word) > 0) return true;
  // Short flags together: -qq, -qU, -Uq.
  return word.size() > 1 && word[0] == '-' && word[1] != '-' &&
         word.find_first_not_of("qvU", 1) == std::string::npos;
}

// `word` is `stem`, `stem`3 or `stem`3.N (pip3.11, python3.11), with no directory.
bool IsVersioned(std::string_view word, std::string_view stem) {
  if (word.substr(0, stem.size()) != stem) return false;
  std::string_view rest = word.substr(stem.size());
  if (rest.empty() || rest == "3") return true;
  if (rest.substr(0, 2) != "3." || rest.size() == 2) return false;
  return std::all_of(rest.begin() + 2, rest.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// pip takes a requirement that ends like an archive for a file (pip's ARCHIVE_EXTENSIONS).
bool NamesArchive(const std::string& word) {
  const std::string lower = markdown::ToLower(word);
  for (std::string_view ext : {".zip", ".whl", ".tar.bz2", ".tbz", ".tar.gz", ".tgz", ".tar",
                               ".tar.xz", ".txz", ".tlz", ".tar.lz", ".tar.lzma"}) {
    if (lower.size() >= ext.size() &&
        lower.compare(lower.size() - ext.size(), ext.size(), ext) == 0)
      return true;
  }
  return false;
}

struct PipArgs {
  std::vector<std::string> options;
  std::vector<std::string> requirements;  // canonical
};

// The words after `pip install`; "" or why they are not index requirements and safe options.
std::string ParseInstallArgs(const std::vector<std::string>& words, size_t i, PipArgs* out) {
  bool options_done = false;
  for (; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (!options_done && w == "--") {
      options_done = true;
    } else if (!options_done && !w.empty() && w[0] == '-') {
      if (!SafeOption(w)) {
        return "pip option " + Quoted(w) +
               " is not one of the plain install options (an index, a file, a path or a URL "
               "is the program's to use)";
      }
      out->options.push_back(w);
    } else if (NamesArchive(w)) {
      return Quoted(w) + " names a file, not an index package";
    } else {
      Requirement r;
      if (std::string why = ParseRequirement(w, &r); !why.empty()) return Quoted(w) + " " + why;
      out->requirements.push_back(r.Text());
    }
  }
  if (out->requirements.empty()) return "a pip install names no package";
  return "";
}

// One command's words: [sudo [-opts]] pip|python -m pip, install, arguments.
std::string ParsePipCommand(const std::vector<std::string>& words, PipArgs* out) {
  size_t i = 0;
  if (i < words.size() && words[i] == "sudo") {
    ++i;
    while (i < words.size() && words[i].size() > 1 && words[i][0] == '-') ++i;
  }
  if (i >= words.size()) return "runs no pip";
  const std::string& program = words[i];
  if (IsVersioned(program, "pip")) {
    ++i;
  } else if (IsVersioned(program, "python") && i + 2 < words.size() && words[i + 1] == "-m" &&
             words[i + 2] == "pip") {
    i += 3;
  } else if (program.find('=') != std::string::npos) {
    return "sets " + Quoted(program) + " for pip";
  } else if (program.find('/') != std::string::npos) {
    return "runs " + Quoted(program) + ", not the system's pip";
  } else {
    return "runs " + Quoted(program) + " before pip";
  }
  if (i >= words.size() || words[i] != "install") return "runs pip without 'install'";
  return ParseInstallArgs(words, i + 1, out);
}

void AddUnique(const std::vector<std::string>& items, std::vector<std::string>* to) {
  for (const auto& item : items) {
    if (std::find(to->begin(), to->end(), item) == to->end()) to->push_back(item);
  }
}

// One line of the step: its pip commands as they run, appended to `script`, and their
// requirements to `requirements`; "" or why the line is not pure pip installs.
std::string ParseLine(const ShellLine& line, std::vector<std::string>* requirements,
                      std::string* script) {
  std::string text;
  size_t end = 0;
  for (size_t k = 0; k < line.commands.size(); ++k) {
    const ShellCommand& cmd = line.commands[k];
    const std::string_view gap =
        markdown::Trim(std::string_view(line.text).substr(end, cmd.begin - end));
    end = cmd.end;
    if (k == 0 ? !gap.empty() : (gap != ";" && gap != "&&" && gap != "||")) {
      return "joins commands with " + Quoted(gap) + " (only ';', '&&' and '||' are an install's)";
    }
    if (!cmd.writes.empty()) return "writes " + Quoted(cmd.writes.front());
    if (cmd.heredoc) return "reads a heredoc";
    if (cmd.kind == CommandKind::kCd) continue;
    if (cmd.kind != CommandKind::kInstall) {
      return "runs " + Quoted(line.text.substr(cmd.begin, cmd.end - cmd.begin)) +
             ", which is not a pip install";
    }
    PipArgs args;
    if (std::string why = ParsePipCommand(cmd.words, &args); !why.empty()) return why;
    if (!text.empty()) text += " " + std::string(gap) + " ";
    text += kPipCommand;
    for (const auto& option : args.options) text += " " + option;
    text += " --";
    for (const auto& r : args.requirements) text += " '" + r + "'";
    AddUnique(args.requirements, requirements);
  }
  std::string_view rest = markdown::Trim(std::string_view(line.text).substr(end));
  if (!rest.empty() && rest.front() == ';') rest = markdown::Trim(rest.substr(1));
  if (!rest.empty() && rest.front() != '#') return "ends with " + Quoted(rest);
  if (!text.empty()) *script += text + "\n";
  return "";
}

}  // namespace

std::string ParsePureInstall(const std::string& shell_code, PureInstall* out) {
  const markdown::ShellScript parsed = markdown::AnalyzeShell(shell_code);
  std::vector<std::string> requirements;
  std::string body;
  for (size_t n = 0; n < parsed.lines.size(); ++n) {
    const ShellLine& line = parsed.lines[n];
    if (line.kind == LineKind::kEmpty) continue;
    std::string why = line.kind == LineKind::kHeredocBody ? "reads a heredoc"
                                                          : ParseLine(line, &requirements, &body);
    if (!why.empty()) return "line " + std::to_string(n + 1) + " " + why;
  }
  if (requirements.empty()) return "installs nothing";
  if (out != nullptr) {
    out->requirements = std::move(requirements);
    out->script =
        "# sandrun: this install step as it runs: pip started isolated from the "
        "workspace, index requirements only\ncd " +
        std::string(kInstallHome) + " || exit 1\n" + body;
  }
  return "";
}

std::vector<std::string> InstallRequirements(const std::string& shell_code) {
  PureInstall pure;
  if (!ParsePureInstall(shell_code, &pure).empty()) return {};
  return pure.requirements;
}

bool RequirementCovered(const std::string& want, const std::vector<std::string>& have) {
  if (std::find(have.begin(), have.end(), want) != have.end()) return true;
  if (NamesOf({want}).front() != want) return false;  // extras or versions: only the same text
  return std::any_of(have.begin(), have.end(),
                     [&](const std::string& h) { return NamesOf({h}).front() == want; });
}

}  // namespace sandrun::run
