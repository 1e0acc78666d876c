// Fenced code blocks of a CommonMark document, read with libcmark (never by splitting on
// backticks): ``` and ~~~ fences of any length, indented fences, fences inside lists and
// block quotes. Indented (4-space) code blocks are not returned: DESIGN.md §5 counts only
// fenced blocks.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sandrun::markdown {

struct FencedBlock {
  std::string info;       // the whole info string, e.g. `python title="app.py"`
  std::string code;       // the block's text, LF line endings, ends with '\n' unless empty
  int start_line = 0;     // 1-based line of the opening fence
  std::string lead_text;  // plain text of the paragraph or heading right before the block,
                          // "" if the block has no such sibling; at most kMaxLeadText bytes
                          // (the tail: the sentence just before the block is what matters)
};

inline constexpr size_t kMaxLeadText = 2048;

// Parses `markdown` (any line endings; invalid UTF-8 is replaced by U+FFFD) and returns its
// fenced code blocks in document order. Linear in the input; never fails.
std::vector<FencedBlock> ExtractFencedBlocks(std::string_view markdown);

}  // namespace sandrun::markdown
