#include "markdown/fenced_blocks.h"

#include <cmark.h>

#include <memory>

#include "markdown/text_util.h"

namespace sandrun::markdown {
namespace {

using NodePtr = std::unique_ptr<cmark_node, decltype(&cmark_node_free)>;
using IterPtr = std::unique_ptr<cmark_iter, decltype(&cmark_iter_free)>;

// Byte offsets of the start of each line, so a node's source position can be looked up.
class LineIndex {
 public:
  explicit LineIndex(std::string_view text) : text_(text) {
    starts_.push_back(0);
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\n') starts_.push_back(i + 1);
    }
  }
  // Line `line` (1-based) from byte column `column` (1-based) to its end; "" if out of range.
  std::string_view From(int line, int column) const {
    if (line < 1 || static_cast<size_t>(line) > starts_.size() || column < 1) return {};
    size_t start = starts_[line - 1];
    size_t end = text_.find('\n', start);
    std::string_view whole = text_.substr(start, end == std::string_view::npos ? end : end - start);
    size_t col = static_cast<size_t>(column - 1);
    return col <= whole.size() ? whole.substr(col) : std::string_view();
  }

 private:
  std::string_view text_;
  std::vector<size_t> starts_;
};

std::string_view Str(const char* s) { return s ? std::string_view(s) : std::string_view(); }

// libcmark 0.30 has no accessor for "fenced"; the source position tells. A fenced block starts
// at its fence (``` or ~~~), an indented one at its first content line. The one ambiguous case,
// an indented block whose first line is itself a fence, has no info string and its first
// content line equals the source there; a real fence never equals its own first content line
// unless it has an info string (a bare fence line would have closed it).
bool IsFenced(cmark_node* node, const LineIndex& lines) {
  std::string_view src =
      Trim(lines.From(cmark_node_get_start_line(node), cmark_node_get_start_column(node)));
  if (src.substr(0, 3) != "```" && src.substr(0, 3) != "~~~") return false;
  if (!Str(cmark_node_get_fence_info(node)).empty()) return true;
  std::string_view literal = Str(cmark_node_get_literal(node));
  return Trim(literal.substr(0, literal.find('\n'))) != src;
}

// Appends the text of `node`'s inline descendants; soft and hard breaks become spaces.
void AppendInlineText(cmark_node* node, std::string* out) {
  IterPtr iter(cmark_iter_new(node), cmark_iter_free);
  cmark_event_type event;
  while ((event = cmark_iter_next(iter.get())) != CMARK_EVENT_DONE) {
    if (event != CMARK_EVENT_ENTER) continue;
    cmark_node* cur = cmark_iter_get_node(iter.get());
    switch (cmark_node_get_type(cur)) {
      case CMARK_NODE_TEXT:
      case CMARK_NODE_CODE:
        out->append(Str(cmark_node_get_literal(cur)));
        break;
      case CMARK_NODE_SOFTBREAK:
      case CMARK_NODE_LINEBREAK:
        out->push_back(' ');
        break;
      default:
        break;
    }
  }
}

std::string LeadText(cmark_node* code_block) {
  cmark_node* prev = cmark_node_previous(code_block);
  if (prev == nullptr) return {};
  cmark_node_type type = cmark_node_get_type(prev);
  if (type != CMARK_NODE_PARAGRAPH && type != CMARK_NODE_HEADING) return {};
  std::string text;
  AppendInlineText(prev, &text);
  if (text.size() > kMaxLeadText) text.erase(0, text.size() - kMaxLeadText);
  return text;
}

}  // namespace

std::vector<FencedBlock> ExtractFencedBlocks(std::string_view markdown) {
  std::string text = NormalizeNewlines(markdown);
  NodePtr doc(
      cmark_parse_document(text.data(), text.size(), CMARK_OPT_SOURCEPOS | CMARK_OPT_VALIDATE_UTF8),
      cmark_node_free);
  std::vector<FencedBlock> blocks;
  if (!doc) return blocks;
  LineIndex lines(text);
  IterPtr iter(cmark_iter_new(doc.get()), cmark_iter_free);
  cmark_event_type event;
  while ((event = cmark_iter_next(iter.get())) != CMARK_EVENT_DONE) {
    cmark_node* node = cmark_iter_get_node(iter.get());
    if (event != CMARK_EVENT_ENTER || cmark_node_get_type(node) != CMARK_NODE_CODE_BLOCK) continue;
    if (!IsFenced(node, lines)) continue;
    FencedBlock block;
    block.info = std::string(Trim(Str(cmark_node_get_fence_info(node))));
    block.code = Str(cmark_node_get_literal(node));
    block.start_line = cmark_node_get_start_line(node);
    block.lead_text = LeadText(node);
    blocks.push_back(std::move(block));
  }
  return blocks;
}

}  // namespace sandrun::markdown
