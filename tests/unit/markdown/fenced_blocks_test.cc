#define BOOST_TEST_MODULE markdown_fenced_blocks
#include "markdown/fenced_blocks.h"

#include <boost/test/unit_test.hpp>

using sandrun::markdown::ExtractFencedBlocks;
using sandrun::markdown::FencedBlock;

BOOST_AUTO_TEST_SUITE(FencedBlocks)

BOOST_AUTO_TEST_CASE(backtick_and_tilde_fences_with_info) {
  auto blocks =
      ExtractFencedBlocks("a\n\n```python title=\"x.py\"\nprint(1)\n```\n\n~~~ bash\nls\n~~~\n");
  BOOST_TEST_REQUIRE(blocks.size() == 2u);
  BOOST_TEST(blocks[0].info == "python title=\"x.py\"");
  BOOST_TEST(blocks[0].code == "print(1)\n");
  BOOST_TEST(blocks[0].start_line == 3);
  BOOST_TEST(blocks[1].info == "bash");
  BOOST_TEST(blocks[1].code == "ls\n");
}

BOOST_AUTO_TEST_CASE(longer_fence_holds_a_shorter_one) {
  auto blocks = ExtractFencedBlocks("````markdown\n```python\nx = 1\n```\n````\n");
  BOOST_TEST_REQUIRE(blocks.size() == 1u);
  BOOST_TEST(blocks[0].info == "markdown");
  BOOST_TEST(blocks[0].code == "```python\nx = 1\n```\n");
}

BOOST_AUTO_TEST_CASE(indented_code_blocks_are_not_fenced_blocks) {
  auto blocks = ExtractFencedBlocks("text\n\n    ```python\n    x = 1\n    ```\n\n    plain = 2\n");
  BOOST_TEST(blocks.empty());
}

BOOST_AUTO_TEST_CASE(fences_indented_up_to_three_spaces_count) {
  auto blocks = ExtractFencedBlocks("   ```py\n   x = 1\n   ```\n");
  BOOST_TEST_REQUIRE(blocks.size() == 1u);
  BOOST_TEST(blocks[0].code == "x = 1\n");
}

BOOST_AUTO_TEST_CASE(fences_in_lists_and_quotes) {
  auto blocks = ExtractFencedBlocks(
      "1. Install:\n\n   ```bash\n   pip install x\n   ```\n\n2. Run:\n   ```python\n   print(1)\n"
      "   ```\n\n> ```sh\n> echo hi\n> ```\n");
  BOOST_TEST_REQUIRE(blocks.size() == 3u);
  BOOST_TEST(blocks[0].code == "pip install x\n");
  BOOST_TEST(blocks[0].lead_text == "Install:");
  BOOST_TEST(blocks[1].code == "print(1)\n");
  BOOST_TEST(blocks[1].lead_text == "Run:");
  BOOST_TEST(blocks[2].code == "echo hi\n");
}

BOOST_AUTO_TEST_CASE(unclosed_fence_runs_to_the_end) {
  auto blocks = ExtractFencedBlocks("```python\nprint(1)\nprint(2)\n");
  BOOST_TEST_REQUIRE(blocks.size() == 1u);
  BOOST_TEST(blocks[0].code == "print(1)\nprint(2)\n");
}

BOOST_AUTO_TEST_CASE(lead_text_is_the_paragraph_just_before) {
  auto blocks = ExtractFencedBlocks(
      "Intro.\n\nSave this as `app.py`:\n```python\nx\n```\n\n```python\ny\n```\n");
  BOOST_TEST_REQUIRE(blocks.size() == 2u);
  BOOST_TEST(blocks[0].lead_text == "Save this as app.py:");
  BOOST_TEST(blocks[1].lead_text.empty());
}

BOOST_AUTO_TEST_CASE(crlf_and_lone_cr_become_lf) {
  auto blocks = ExtractFencedBlocks("```bash\r\necho a\r\necho b\recho c\r\n```\r\n");
  BOOST_TEST_REQUIRE(blocks.size() == 1u);
  BOOST_TEST(blocks[0].code == "echo a\necho b\necho c\n");
}

BOOST_AUTO_TEST_CASE(invalid_utf8_and_nul_are_replaced) {
  std::string md("```python\nprint('\xff')\n\0\n```\n", 22);
  auto blocks = ExtractFencedBlocks(md);
  BOOST_TEST_REQUIRE(blocks.size() == 1u);
  BOOST_TEST(blocks[0].code.find('\xff') == std::string::npos);
  BOOST_TEST(blocks[0].code.find('\0') == std::string::npos);
  BOOST_TEST(blocks[0].code.find("\xEF\xBF\xBD") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(lead_text_is_bounded) {
  std::string md = std::string(100000, 'w') + " last words:\n```python\nx\n```\n";
  auto blocks = ExtractFencedBlocks(md);
  BOOST_TEST_REQUIRE(blocks.size() == 1u);
  BOOST_TEST(blocks[0].lead_text.size() <= sandrun::markdown::kMaxLeadText);
  BOOST_TEST(blocks[0].lead_text.ends_with("last words:"));
}

BOOST_AUTO_TEST_SUITE_END()
