// Excerpts: a block whose lines all appear in earlier blocks of the same language (the model
// quoting its own code while explaining it). Linear-logarithmic in the total number of lines
// (a sort, not a hash table an adversary could flood), so a 1 MB message stays fast.
#pragma once

#include <string>
#include <vector>

#include "markdown/block_analysis.h"

namespace sandrun::markdown {

// For each block: empty if it is not a repeat (or not runnable), else the earlier blocks its
// lines come from (ascending, at most kMaxRepeatSources; more are dropped). Blank lines, and
// for Python and shell comment lines and `...`, do not count; a block with no other line is
// not a repeat.
inline constexpr size_t kMaxRepeatSources = 3;
std::vector<std::vector<int>> FindRepeats(const std::vector<AnalyzedBlock>& blocks);

// An original-then-fixed pair ("Here is your code ... it fails ... Here is the fixed version:"):
// block i is superseded by a later block j of the same language when the paragraph just before
// j says so (a word of kFixWords, e.g. "fixed", "corrected", "instead") and the two share at
// least half of the lines of the longer one, and at least 2 (lines counted as FindRepeats
// does). i is the nearest earlier such block of j's language that is runnable, not a repeat
// and not already superseded; only the kMaxSupersedeLookBack nearest are compared. Steps of a
// notebook answer ("Next, ...") are never superseded: their text says no such word, and they
// share few lines. Linear in the total number of lines times kMaxSupersedeLookBack.
struct Superseded {
  int by = -1;        // the block that replaces this one; -1 when none
  std::string word;   // the word of the text before `by` that says it is a fix
  size_t shared = 0;  // lines the two blocks share
  size_t lines = 0;   // lines of this block
};
inline constexpr size_t kMaxSupersedeLookBack = 4;
std::vector<Superseded> FindSuperseded(const std::vector<AnalyzedBlock>& blocks,
                                       const std::vector<std::vector<int>>& repeats);

}  // namespace sandrun::markdown
