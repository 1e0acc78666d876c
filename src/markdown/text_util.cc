#include "markdown/text_util.h"

#include <algorithm>
#include <array>

#include "util/relative_path.h"

namespace sandrun::markdown {

std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::string_view Trim(std::string_view text) {
  const char* kSpace = " \t\r";
  size_t a = text.find_first_not_of(kSpace);
  if (a == std::string_view::npos) return {};
  size_t b = text.find_last_not_of(kSpace);
  return text.substr(a, b - a + 1);
}

std::string ToLower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool IsBlank(std::string_view line) { return Trim(line).empty(); }

std::string NormalizeNewlines(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\r') {
      out.push_back(text[i]);
    } else if (i + 1 >= text.size() || text[i + 1] != '\n') {
      out.push_back('\n');
    }
  }
  return out;
}

namespace {

bool IsPathChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-' || c == '+' || c == '/';
}

}  // namespace

bool IsSafeRelativePath(std::string_view path) {
  // The one rule set (util/relative_path.h), narrowed to the names one writes in prose.
  if (!util::RelativePathError(path).empty() || path.size() > 200) return false;
  if (!std::all_of(path.begin(), path.end(), IsPathChar)) return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view segment = path.substr(start, end - start);
    // No hidden segment: keeps saved blocks out of .sandrun/ (the daemon's own files in the
    // workspace), .local/ and .cache/.
    if (segment[0] == '.' || segment[0] == '-') return false;
    start = end + 1;
  }
  return true;
}

std::string FileExtension(std::string_view path) {
  size_t slash = path.rfind('/');
  std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == name.size()) return {};
  return ToLower(name.substr(dot + 1));
}

bool IsKnownFileExtension(std::string_view ext) {
  static constexpr std::array<std::string_view, 36> kKnown = {
      "py",  "sh",  "bash", "zsh", "txt",  "csv", "tsv", "json", "jsonl", "yaml", "yml", "toml",
      "ini", "cfg", "conf", "xml", "html", "htm", "css", "md",   "sql",   "js",   "mjs", "ts",
      "r",   "rb",  "pl",   "go",  "rs",   "c",   "h",   "cc",   "cpp",   "java", "dat", "env"};
  return std::find(kKnown.begin(), kKnown.end(), ext) != kKnown.end();
}

std::string_view FamilyOfExtension(std::string_view ext) {
  if (ext == "py") return kPythonFamily;
  if (ext == "sh" || ext == "bash" || ext == "zsh") return kShellFamily;
  return {};
}

std::string CleanFileToken(std::string_view token) {
  const std::string_view kLead = "\"'`([{<*_";
  const std::string_view kTail = "\"'`)]}>*_:;,.!?";
  while (!token.empty() && kLead.find(token.front()) != std::string_view::npos) {
    token.remove_prefix(1);
  }
  while (!token.empty() && kTail.find(token.back()) != std::string_view::npos) {
    token.remove_suffix(1);
  }
  if (token.substr(0, 2) == "./") token.remove_prefix(2);
  if (!IsSafeRelativePath(token) || !IsKnownFileExtension(FileExtension(token))) return {};
  return std::string(token);
}

std::vector<std::string_view> Words(std::string_view text) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n')) ++i;
    size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\t' && text[i] != '\n') ++i;
    if (i > start) words.push_back(text.substr(start, i - start));
  }
  return words;
}

}  // namespace sandrun::markdown

namespace sandrun::markdown {

namespace {

// "$ cmd" -> "cmd"; a bare "$" (the prompt of an empty command line) -> "".
bool TakePrompt(std::string_view line, std::string_view prompt, std::string* out) {
  if (prompt.empty()) return false;
  std::string_view bare = Trim(prompt);
  if (line.substr(0, prompt.size()) == prompt) {
    *out = std::string(line.substr(prompt.size()));
    return true;
  }
  if (Trim(line) == bare) {
    out->clear();
    return true;
  }
  return false;
}

}  // namespace

PromptLines StripPrompts(std::string_view code, std::string_view prompt,
                         std::string_view continuation) {
  PromptLines out;
  std::string command;
  for (std::string_view line : SplitLines(code)) {
    std::string_view trimmed = line.substr(std::min(line.find_first_not_of(' '), line.size()));
    if (IsBlank(line)) continue;
    if (TakePrompt(trimmed, prompt, &command) || TakePrompt(trimmed, continuation, &command)) {
      out.any_prompt = true;
      out.code += command;
      out.code += '\n';
    } else {
      out.all_prompts = false;
    }
  }
  if (!out.any_prompt) out.all_prompts = false;
  return out;
}

}  // namespace sandrun::markdown
