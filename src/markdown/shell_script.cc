#include "markdown/shell_script.h"

#include <algorithm>
#include <array>
#include <deque>
#include <set>

#include "markdown/text_util.h"

namespace sandrun::markdown {
namespace {

enum class TokenType { kWord, kSeparator, kRedirectOut, kRedirectIn, kHeredoc };

struct Token {
  TokenType type = TokenType::kWord;
  std::string text;  // quotes removed for words
  size_t begin = 0;
  size_t end = 0;
};

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }
bool IsSeparatorChar(char c) { return c == ';' || c == '&' || c == '|'; }

// Splits one line into words (with shell quoting), command separators (; & && | ||),
// redirections (> >> and their fd forms, <, <<<) and heredoc starts (<< <<-). A '#' at the
// start of a word ends the line.
class Tokenizer {
 public:
  explicit Tokenizer(std::string_view line) : s_(line) {}

  std::vector<Token> Run() {
    while (SkipSpaces() && !Comment()) {
      if (IsSeparatorChar(s_[i_])) {
        Separator();
      } else if (s_[i_] == '>' || s_[i_] == '<') {
        Redirect();
      } else {
        Word();
      }
    }
    return std::move(tokens_);
  }

 private:
  bool SkipSpaces() {
    while (i_ < s_.size() && IsSpace(s_[i_])) ++i_;
    return i_ < s_.size();
  }
  bool Comment() const { return s_[i_] == '#'; }

  void Separator() {
    size_t begin = i_;
    // "&>" is a redirection of both streams, not a separator.
    if (s_[i_] == '&' && i_ + 1 < s_.size() && s_[i_ + 1] == '>') {
      ++i_;
      Redirect();
      tokens_.back().begin = begin;
      return;
    }
    char c = s_[i_++];
    if (i_ < s_.size() && s_[i_] == c && c != ';') ++i_;
    tokens_.push_back(
        {TokenType::kSeparator, std::string(s_.substr(begin, i_ - begin)), begin, i_});
  }

  void Redirect() {
    size_t begin = i_;
    char c = s_[i_];
    size_t run = 0;
    while (i_ < s_.size() && s_[i_] == c && run < 3) ++i_, ++run;
    TokenType type = TokenType::kRedirectOut;
    if (c == '<') type = run == 2 ? TokenType::kHeredoc : TokenType::kRedirectIn;
    if (type == TokenType::kHeredoc && i_ < s_.size() && s_[i_] == '-') ++i_;
    if (c == '>' && i_ < s_.size() && (s_[i_] == '|' || s_[i_] == '&')) ++i_;
    tokens_.push_back({type, std::string(s_.substr(begin, i_ - begin)), begin, i_});
  }

  void Word() {
    size_t begin = i_;
    std::string text;
    while (i_ < s_.size() && !IsSpace(s_[i_]) && !IsSeparatorChar(s_[i_]) && s_[i_] != '>' &&
           s_[i_] != '<') {
      char c = s_[i_++];
      if (c == '\\' && i_ < s_.size()) {
        text.push_back(s_[i_++]);
      } else if (c == '\'' || c == '"') {
        size_t close = s_.find(c, i_);
        if (close == std::string_view::npos) close = s_.size();
        text.append(s_.substr(i_, close - i_));
        i_ = std::min(close + 1, s_.size());
      } else {
        text.push_back(c);
      }
    }
    // "2>file": digits glued to a redirection name a file descriptor, not a word.
    bool fd = i_ < s_.size() && s_[i_] == '>' &&
              std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (fd) {
      Redirect();
      tokens_.back().begin = begin;
      return;
    }
    tokens_.push_back({TokenType::kWord, std::move(text), begin, i_});
  }

  std::string_view s_;
  size_t i_ = 0;
  std::vector<Token> tokens_;
};

// One command's words, with redirections taken out.
struct RawCommand {
  std::vector<std::string> words;
  std::vector<std::string> writes;
  std::vector<std::string> heredocs;  // delimiters, in order
  size_t begin = 0;
  size_t end = 0;
};

std::vector<RawCommand> SplitCommands(const std::vector<Token>& tokens) {
  std::vector<RawCommand> commands(1);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const Token& t = tokens[i];
    RawCommand& cmd = commands.back();
    if (cmd.words.empty() && cmd.writes.empty() && cmd.heredocs.empty()) cmd.begin = t.begin;
    if (t.type == TokenType::kSeparator) {
      commands.emplace_back();
      continue;
    }
    cmd.end = t.end;
    if (t.type == TokenType::kWord) {
      cmd.words.push_back(t.text);
      continue;
    }
    // Redirections: the target is the next word (or glued, as in ">&2").
    bool has_target = i + 1 < tokens.size() && tokens[i + 1].type == TokenType::kWord;
    std::string target = has_target ? tokens[++i].text : std::string();
    if (has_target) cmd.end = tokens[i].end;
    if (t.type == TokenType::kHeredoc && !target.empty()) cmd.heredocs.push_back(target);
    bool real_file = !target.empty() && target[0] != '&' && target.rfind("/dev/", 0) != 0;
    if (t.type == TokenType::kRedirectOut && t.text.back() != '&' && real_file) {
      cmd.writes.push_back(target);
    }
  }
  std::erase_if(commands, [](const RawCommand& c) {
    return c.words.empty() && c.writes.empty() && c.heredocs.empty();
  });
  return commands;
}

std::string_view BaseName(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// "python", "python3", "python3.11" (also as /usr/bin/python3).
bool IsPythonProgram(std::string_view word) {
  std::string_view name = BaseName(word);
  if (name.substr(0, 6) != "python") return false;
  return std::all_of(name.begin() + 6, name.end(),
                     [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

bool IsPipProgram(std::string_view word) {
  std::string_view name = BaseName(word);
  if (name.substr(0, 3) != "pip") return false;
  return std::all_of(name.begin() + 3, name.end(),
                     [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

bool IsSystemPackageManager(std::string_view program) {
  static constexpr std::array<std::string_view, 15> kManagers = {
      "apt",    "apt-get", "aptitude", "yum",  "dnf",   "brew",   "conda", "mamba",
      "pacman", "apk",     "zypper",   "snap", "choco", "winget", "port"};
  return std::find(kManagers.begin(), kManagers.end(), program) != kManagers.end();
}

// Drops leading `VAR=value`, `sudo [-opts]`, `time`, `command`, `exec` prefixes.
size_t SkipPrefixes(const std::vector<std::string>& words) {
  size_t i = 0;
  while (i < words.size()) {
    const std::string& w = words[i];
    size_t eq = w.find('=');
    bool assignment = eq != std::string::npos && eq > 0 && w.find('/') > eq;
    if (assignment || w == "time" || w == "command" || w == "exec") {
      ++i;
    } else if (w == "sudo") {
      ++i;
      while (i < words.size() && words[i].size() > 1 && words[i][0] == '-') ++i;
    } else {
      break;
    }
  }
  return i;
}

void AddRef(std::string_view word, std::string_view family, bool requirements, ShellCommand* cmd) {
  std::string file(word.substr(0, 2) == "./" ? word.substr(2) : word);
  if (!IsSafeRelativePath(file)) return;
  if (family.empty() && !requirements) family = FamilyOfExtension(FileExtension(file));
  cmd->refs.push_back({file, family, requirements});
}

// `pip install ...` from words[i] on (i at "install"); collects -r files.
void ClassifyInstall(const std::vector<std::string>& w, size_t i, ShellCommand* cmd) {
  cmd->kind = CommandKind::kInstall;
  for (++i; i < w.size(); ++i) {
    if ((w[i] == "-r" || w[i] == "--requirement") && i + 1 < w.size()) {
      AddRef(w[++i], "", true, cmd);
    } else if (w[i].size() > 2 && w[i].rfind("-r", 0) == 0 && w[i][2] != '-') {
      AddRef(std::string_view(w[i]).substr(2), "", true, cmd);
    } else if (w[i].rfind("--requirement=", 0) == 0) {
      AddRef(std::string_view(w[i]).substr(14), "", true, cmd);
    }
  }
}

// The first word after options ("-u", "-B", ...) at or after `i`, or "" if none.
std::string_view FirstOperand(const std::vector<std::string>& w, size_t i) {
  while (i < w.size() && w[i].size() > 1 && w[i][0] == '-' && w[i] != "-m" && w[i] != "-c") ++i;
  return i < w.size() ? std::string_view(w[i]) : std::string_view();
}

void ClassifyPython(const std::vector<std::string>& w, size_t i, ShellCommand* cmd) {
  std::string_view operand = FirstOperand(w, i + 1);
  if (operand == "-m") {
    size_t m = std::find(w.begin() + i, w.end(), "-m") - w.begin() + 1;
    if (m < w.size() && w[m] == "pip") {
      if (m + 1 < w.size() && w[m + 1] == "install") ClassifyInstall(w, m + 1, cmd);
    } else if (m < w.size() && w[m].find('.') == std::string::npos) {
      // `python -m app` runs app.py from the working directory.
      cmd->kind = CommandKind::kRunFile;
      AddRef(w[m] + ".py", kPythonFamily, false, cmd);
    }
  } else if (!operand.empty() && operand != "-c" && FileExtension(operand) == "py") {
    cmd->kind = CommandKind::kRunFile;
    AddRef(operand, kPythonFamily, false, cmd);
  }
  if (cmd->kind == CommandKind::kRunFile && cmd->refs.empty()) cmd->kind = CommandKind::kOther;
}

void ClassifyWords(const std::vector<std::string>& w, ShellCommand* cmd) {
  size_t i = SkipPrefixes(w);
  if (i >= w.size()) return;
  const std::string& p = w[i];
  cmd->program = std::string(BaseName(p));
  if (IsPipProgram(p) && i + 1 < w.size() && w[i + 1] == "install") {
    ClassifyInstall(w, i + 1, cmd);
  } else if (IsPythonProgram(p)) {
    ClassifyPython(w, i, cmd);
  } else if (IsSystemPackageManager(cmd->program)) {
    cmd->kind = CommandKind::kSystemInstall;
  } else if (cmd->program == "bash" || cmd->program == "sh" || cmd->program == "zsh" ||
             p == "source" || p == ".") {
    std::string_view operand = FirstOperand(w, i + 1);
    if (!operand.empty() && operand != "-c" && operand[0] != '-') {
      cmd->kind = CommandKind::kRunFile;
      AddRef(operand, kShellFamily, false, cmd);
    }
  } else if (p.rfind("./", 0) == 0 && p.size() > 2) {
    cmd->kind = CommandKind::kRunFile;
    AddRef(p, "", false, cmd);
  } else if (p == "chmod" && w.size() == i + 3 && w[i + 1].find('x') != std::string::npos) {
    cmd->kind = CommandKind::kChmod;
    AddRef(w[i + 2], "", false, cmd);
  } else if (p == "chmod" && w.size() == i + 3 && (w[i + 1] == "755" || w[i + 1] == "700")) {
    cmd->kind = CommandKind::kChmod;
    AddRef(w[i + 2], "", false, cmd);
  } else if (p == "cd") {
    cmd->kind = CommandKind::kCd;
  }
  bool names_file = cmd->kind == CommandKind::kRunFile || cmd->kind == CommandKind::kChmod;
  if (names_file && cmd->refs.empty()) cmd->kind = CommandKind::kOther;
}

LineKind KindOfLine(const std::vector<ShellCommand>& commands) {
  if (commands.empty()) return LineKind::kEmpty;
  auto count = [&](CommandKind k) {
    return std::count_if(commands.begin(), commands.end(),
                         [k](const ShellCommand& c) { return c.kind == k; });
  };
  size_t n = commands.size();
  if (count(CommandKind::kOther) > 0) return LineKind::kOther;
  if (count(CommandKind::kSystemInstall) == static_cast<long>(n)) return LineKind::kSystemInstall;
  if (count(CommandKind::kSystemInstall) > 0) return LineKind::kOther;
  if (count(CommandKind::kInstall) > 0) return LineKind::kInstall;
  return LineKind::kRun;
}

}  // namespace

ShellScript AnalyzeShell(std::string_view code) {
  ShellScript script;
  std::set<std::string> written;             // script.writes, for uniqueness in log time
  std::deque<std::string> pending_heredocs;  // delimiters still to be closed, in order
  for (std::string_view text : SplitLines(code)) {
    ShellLine line;
    line.text = std::string(text);
    if (!pending_heredocs.empty()) {
      line.kind = LineKind::kHeredocBody;
      if (Trim(text) == pending_heredocs.front()) pending_heredocs.pop_front();
      script.lines.push_back(std::move(line));
      continue;
    }
    std::vector<Token> tokens = Tokenizer(text).Run();
    std::vector<RawCommand> commands = SplitCommands(tokens);
    // Operators without a command (";", a lone ">") are for bash to judge: they run.
    if (commands.empty() && !tokens.empty()) commands.emplace_back();
    for (RawCommand& raw : commands) {
      ShellCommand cmd;
      cmd.begin = raw.begin;
      cmd.end = raw.end;
      ClassifyWords(raw.words, &cmd);
      cmd.words = raw.words;
      cmd.heredoc = !raw.heredocs.empty();
      // A command that writes files and is not itself a run-file command is setup (e.g.
      // `cat > app.py <<EOF`); `python app.py > out.txt` just captures output.
      if (cmd.kind != CommandKind::kRunFile && cmd.kind != CommandKind::kInstall) {
        if (cmd.program == "tee") {
          for (size_t i = 1; i < raw.words.size(); ++i) {
            if (raw.words[i][0] != '-') raw.writes.push_back(raw.words[i]);
          }
        }
        if (!raw.writes.empty() || !raw.heredocs.empty()) cmd.kind = CommandKind::kOther;
        for (const std::string& w : raw.writes) {
          std::string file = w.substr(0, 2) == "./" ? w.substr(2) : w;
          if (IsSafeRelativePath(file) && written.insert(file).second) {
            script.writes.push_back(file);
          }
        }
      }
      cmd.writes = raw.writes;
      for (std::string& d : raw.heredocs) pending_heredocs.push_back(std::move(d));
      line.commands.push_back(std::move(cmd));
    }
    line.kind = KindOfLine(line.commands);
    script.lines.push_back(std::move(line));
  }
  return script;
}

}  // namespace sandrun::markdown
