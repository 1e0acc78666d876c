// Small pure string helpers shared by the markdown planner (no side effects).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sandrun::markdown {

// Language families the planner understands beyond "run it": Python and the shell.
inline constexpr std::string_view kPythonFamily = "python";
inline constexpr std::string_view kShellFamily = "shell";

// Lines of `text` without their '\n'; a final '\n' does not make an extra empty line.
std::vector<std::string_view> SplitLines(std::string_view text);

// `text` without leading and trailing spaces, tabs and carriage returns.
std::string_view Trim(std::string_view text);

// ASCII lower case.
std::string ToLower(std::string_view text);

// True when the line holds nothing but spaces and tabs.
bool IsBlank(std::string_view line);

// CRLF and lone CR become LF, so code never reaches bash with a '\r' on each line; the number
// of lines stays the same (CommonMark counts a lone CR as a line ending too).
std::string NormalizeNewlines(std::string_view text);

// True for a workspace-relative path a block may be saved to: '/'-separated segments of
// [A-Za-z0-9._+-], none empty or starting with '.' or '-' (so no "..", no .sandrun/), at
// most 200 bytes.
bool IsSafeRelativePath(std::string_view path);

// Lower-case extension of the last path segment ("py" for "src/app.py"), "" if none.
std::string FileExtension(std::string_view path);

// Extensions that make a word in prose look like a file name (code and data files).
bool IsKnownFileExtension(std::string_view ext);

// kPythonFamily for "py", kShellFamily for "sh"/"bash"/"zsh", "" otherwise.
std::string_view FamilyOfExtension(std::string_view ext);

// A word from prose, an info string or a comment reduced to a file name: surrounding quotes,
// backticks, brackets and trailing punctuation removed, a leading "./" dropped. Returns ""
// unless the result is a safe relative path with a known extension.
std::string CleanFileToken(std::string_view token);

// Whitespace-separated words of `text`.
std::vector<std::string_view> Words(std::string_view text);

// A session transcript reduced to its commands: lines starting with `prompt` ("$ ", ">>> ")
// or `continuation` ("... ", may be "") lose it and are kept, other lines are dropped.
// `all_prompts`: every non-blank line had a prompt (the block is commands, not output).
struct PromptLines {
  std::string code;
  bool all_prompts = true;
  bool any_prompt = false;
};
PromptLines StripPrompts(std::string_view code, std::string_view prompt,
                         std::string_view continuation);

}  // namespace sandrun::markdown
