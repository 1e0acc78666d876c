// libFuzzer target for the run planner (markdown/run_plan.h): any bytes, as a message, must
// give a plan or a clean error, quickly, and the plan must keep its invariants.
//
// Input: the message, except that a first byte below 0x08 is taken off and chooses `block`
// (0x00 -> all blocks, 0x01 -> block 0, ... 0x07 -> block 6), so text seeds plan all blocks.
// A second byte below 0x08 after that chooses the languages (0x01: Python only; 0x02: Python,
// bash and node).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "markdown/fenced_blocks.h"
#include "markdown/run_plan.h"
#include "markdown/text_util.h"

namespace {

using namespace sandrun::markdown;

void Check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "plan_fuzzer: invariant broken: %s\n", what);
  std::abort();
}

std::vector<LanguageAliases> Languages(uint8_t choice) {
  std::vector<LanguageAliases> langs = DefaultLanguages();
  if (choice == 1) langs.pop_back();
  if (choice == 2) langs.push_back({"node", {"js", "javascript"}});
  return langs;
}

void CheckPlan(std::string_view markdown, int block, const RunPlan& plan) {
  Check(plan.plan.size() == ExtractFencedBlocks(markdown).size(), "one plan entry per block");
  for (size_t i = 0; i < plan.plan.size(); ++i) {
    Check(plan.plan[i].index == static_cast<int>(i), "plan in block order");
    Check(!plan.plan[i].reason.empty(), "every block has a reason");
    if (block != kAllBlocks) Check(plan.plan[i].run == (static_cast<int>(i) == block), "block");
  }
  bool runs = false;
  int last = 0;
  for (const Step& s : plan.steps) {
    Check(s.block_index >= last && s.block_index < static_cast<int>(plan.plan.size()),
          "steps in document order");
    last = s.block_index;
    Check(s.kind == Step::Kind::kSave || !s.language.empty(), "step language");
    Check(s.code.find('\r') == std::string::npos, "no CR in code");
    Check((s.kind == Step::Kind::kSave) == !s.save_as.empty(), "save_as only on save steps");
    Check(s.save_as.empty() || IsSafeRelativePath(s.save_as), "safe save_as");
    if (block != kAllBlocks) Check(s.block_index == block, "only the chosen block");
    runs = runs || s.kind != Step::Kind::kSave;
  }
  Check(runs, "a plan runs something");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int block = kAllBlocks;
  uint8_t languages = 0;
  if (size > 0 && data[0] < 0x08) {
    block = static_cast<int>(data[0]) - 1;
    ++data, --size;
    if (size > 0 && data[0] < 0x08) languages = data[0], ++data, --size;
  }
  std::string_view markdown(reinterpret_cast<const char*>(data), size);
  auto result = BuildRunPlan(markdown, Languages(languages), block);
  if (result.ok()) {
    CheckPlan(markdown, block, *result);
  } else {
    const std::string code = sandrun::ErrorKindName(result.error().kind);
    Check(code == "no_runnable_code" || code == "bad_block" || code == "too_large", "error code");
    Check(!result.error().message.empty(), "error message");
  }
  return 0;
}
