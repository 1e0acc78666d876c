#include "markdown/repeats.h"

#include <algorithm>
#include <array>
#include <cctype>
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

namespace {

// Words of a paragraph that say the block after it corrects an earlier one.
constexpr std::array<std::string_view, 9> kFixWords = {
    "fix", "fixed", "fixes", "corrected", "correction", "updated", "revised", "instead", "bugfix"};

// The first word of kFixWords in `lead` (whole words, any case), "" if none.
std::string FixWord(std::string_view lead) {
  const std::string lower = ToLower(lead);
  size_t i = 0;
  while (i < lower.size()) {
    while (i < lower.size() && !std::isalpha(static_cast<unsigned char>(lower[i]))) ++i;
    size_t j = i;
    while (j < lower.size() && std::isalpha(static_cast<unsigned char>(lower[j]))) ++j;
    std::string_view word(lower.data() + i, j - i);
    if (std::find(kFixWords.begin(), kFixWords.end(), word) != kFixWords.end()) {
      return std::string(word);
    }
    i = j;
  }
  return {};
}

// The lines of a block that count (as in FindRepeats), trimmed and sorted.
std::vector<std::string_view> SortedLines(const AnalyzedBlock& b) {
  std::vector<std::string_view> out;
  for (std::string_view line : SplitLines(b.code)) {
    std::string_view t = Trim(line);
    if (Counts(t, b.family)) out.push_back(t);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Lines the two sorted lists share, each line counted as often as both have it.
size_t SharedLines(const std::vector<std::string_view>& a, const std::vector<std::string_view>& b) {
  size_t shared = 0;
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    int c = a[i].compare(b[j]);
    if (c == 0) ++shared;
    if (c <= 0) ++i;
    if (c >= 0) ++j;
  }
  return shared;
}

}  // namespace

std::vector<Superseded> FindSuperseded(const std::vector<AnalyzedBlock>& blocks,
                                       const std::vector<std::vector<int>>& repeats) {
  std::vector<Superseded> out(blocks.size());
  std::vector<std::vector<std::string_view>> lines(blocks.size());
  auto active = [&](size_t k) {
    return blocks[k].kind != BlockKind::kNotRunnable && repeats[k].empty() && out[k].by < 0;
  };
  for (size_t k = 0; k < blocks.size(); ++k) {
    if (active(k)) lines[k] = SortedLines(blocks[k]);
  }
  for (size_t j = 1; j < blocks.size(); ++j) {
    if (!active(j) || lines[j].empty()) continue;
    std::string word = FixWord(blocks[j].source.lead_text);
    if (word.empty()) continue;
    size_t compared = 0;
    // At most 32 blocks back whatever their languages: the work stays linear in the blocks.
    for (size_t i = j; i-- > 0 && compared < kMaxSupersedeLookBack && j - i <= 32;) {
      if (!active(i) || blocks[i].language != blocks[j].language) continue;
      ++compared;
      // Half of the longer one shared: the shorter one has at least half as many lines,
      // which also bounds the work of each comparison by the later block's size.
      const size_t longer = std::max(lines[i].size(), lines[j].size());
      if (2 * std::min(lines[i].size(), lines[j].size()) < longer) continue;
      const size_t shared = SharedLines(lines[i], lines[j]);
      if (shared < 2 || 2 * shared < longer) continue;
      out[i] = {static_cast<int>(j), word, shared, lines[i].size()};
      break;
    }
  }
  return out;
}

}  // namespace sandrun::markdown
