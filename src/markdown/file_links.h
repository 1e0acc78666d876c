// The links between blocks through files: which earlier block a how-to-run command
// (`python app.py`) runs, which blocks are therefore saved to a file instead of being run,
// and which named blocks are saved because later code imports or reads them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "markdown/block_analysis.h"

namespace sandrun::markdown {

// Why a block is written to a file.
enum class SaveReason { kNone, kRunBy, kImportedBy, kUsedBy };

struct BlockLinks {
  std::string save_as;  // non-empty: the block is written to this file
  SaveReason why = SaveReason::kNone;
  int user = -1;  // the block that runs, imports or reads the file
  // Files the block's commands name: file -> what provides it ("runs block 1 saved as app.py",
  // "runs app.py written by block 0"); unresolved files are absent.
  std::map<std::string, std::string> resolved;
  std::vector<std::string> resolved_order;  // keys of `resolved`, in order of first use
};

// Links the blocks. `repeats[i]` non-empty marks block i as an excerpt (it provides nothing
// and its commands are not resolved). Linear-logarithmic in the number of blocks and lines.
std::vector<BlockLinks> LinkBlocks(const std::vector<AnalyzedBlock>& blocks,
                                   const std::vector<std::vector<int>>& repeats);

}  // namespace sandrun::markdown
