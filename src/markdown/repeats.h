// Excerpts: a block whose lines all appear in earlier blocks of the same language (the model
// quoting its own code while explaining it). Linear-logarithmic in the total number of lines
// (a sort, not a hash table an adversary could flood), so a 1 MB message stays fast.
#pragma once

#include <vector>

#include "markdown/block_analysis.h"

namespace sandrun::markdown {

// For each block: empty if it is not a repeat (or not runnable), else the earlier blocks its
// lines come from (ascending, at most kMaxRepeatSources; more are dropped). Blank lines, and
// for Python and shell comment lines and `...`, do not count; a block with no other line is
// not a repeat.
inline constexpr size_t kMaxRepeatSources = 3;
std::vector<std::vector<int>> FindRepeats(const std::vector<AnalyzedBlock>& blocks);

}  // namespace sandrun::markdown
