#include "markdown/repeats.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string_view>

#include "markdown/text_util.h"

namespace sandrun::markdown {
namespace {

struct LineRef {
  uint32_t block;
  uint32_t offset;  // into blocks[block].code
  uint32_t length;
};

bool Counts(std::string_view line, std::string_view family) {
  if (line.empty()) return false;
  if (family.empty()) return true;
  return line[0] != '#' && line != "...";
}

// Lines of every runnable block, trimmed, with a language id per block so that equal lines of
// different languages never match.
std::vector<LineRef> CollectLines(const std::vector<AnalyzedBlock>& blocks,
                                  std::vector<int>* language_ids) {
  std::map<std::string, int> ids;
  std::vector<LineRef> lines;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const AnalyzedBlock& b = blocks[i];
    (*language_ids)[i] = ids.emplace(b.language, static_cast<int>(ids.size())).first->second;
    if (b.kind == BlockKind::kNotRunnable) continue;
    std::string_view code = b.code;
    for (std::string_view line : SplitLines(code)) {
      std::string_view t = Trim(line);
      if (!Counts(t, b.family)) continue;
      lines.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(t.data() - code.data()),
                       static_cast<uint32_t>(t.size())});
    }
  }
  return lines;
}

}  // namespace

std::vector<std::vector<int>> FindRepeats(const std::vector<AnalyzedBlock>& blocks) {
  std::vector<int> lang(blocks.size());
  std::vector<LineRef> lines = CollectLines(blocks, &lang);
  auto text = [&](const LineRef& r) {
    return std::string_view(blocks[r.block].code).substr(r.offset, r.length);
  };
  // Sorted by (language, text, block): each run of equal lines starts with its first block.
  std::sort(lines.begin(), lines.end(), [&](const LineRef& a, const LineRef& b) {
    if (lang[a.block] != lang[b.block]) return lang[a.block] < lang[b.block];
    int c = text(a).compare(text(b));
    return c != 0 ? c < 0 : a.block < b.block;
  });
  std::vector<size_t> total(blocks.size()), covered(blocks.size());
  std::vector<std::vector<int>> sources(blocks.size());
  for (size_t i = 0; i < lines.size();) {
    size_t j = i;
    uint32_t first = lines[i].block;
    for (; j < lines.size() && lang[lines[j].block] == lang[first] &&
           text(lines[j]) == text(lines[i]);
         ++j) {
      uint32_t b = lines[j].block;
      ++total[b];
      if (b == first) continue;
      ++covered[b];
      std::vector<int>& s = sources[b];
      if (s.size() < kMaxRepeatSources && std::find(s.begin(), s.end(), first) == s.end()) {
        s.push_back(static_cast<int>(first));
      }
    }
    i = j;
  }
  for (size_t b = 0; b < blocks.size(); ++b) {
    if (total[b] == 0 || covered[b] != total[b]) sources[b].clear();
    std::sort(sources[b].begin(), sources[b].end());
  }
  return sources;
}

}  // namespace sandrun::markdown
