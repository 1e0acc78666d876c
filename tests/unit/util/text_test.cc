#define BOOST_TEST_MODULE util_text
#include "util/text.h"

#include <boost/test/unit_test.hpp>

using sandrun::util::HeadTailBuffer;
using sandrun::util::SanitizeUtf8;

BOOST_AUTO_TEST_SUITE(Utf8)

BOOST_AUTO_TEST_CASE(keeps_valid_text) {
  std::string text =
      "na\xC3\xAFve caf\xC3\xA9 \xE2\x80\x94 \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80";
  BOOST_TEST(SanitizeUtf8(text) == text);
}

BOOST_AUTO_TEST_CASE(replaces_each_maximal_invalid_subpart) {
  // \xff and \xfe are never valid; \xc3 followed by '(' is a truncated sequence.
  BOOST_TEST(SanitizeUtf8("a\xff\xfe\xc3(b") == "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD(b");
}

BOOST_AUTO_TEST_CASE(refuses_overlongs_and_surrogates) {
  BOOST_TEST(SanitizeUtf8("\xC0\xAF") == "\xEF\xBF\xBD\xEF\xBF\xBD");
  BOOST_TEST(SanitizeUtf8("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  BOOST_TEST(SanitizeUtf8("\xF4\x90\x80\x80") ==
             "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

BOOST_AUTO_TEST_CASE(keeps_nul_bytes) {
  std::string text("a\0b", 3);
  BOOST_TEST(SanitizeUtf8(text) == text);
}

BOOST_AUTO_TEST_CASE(truncated_sequence_at_end) {
  BOOST_TEST(SanitizeUtf8("ok\xE2\x80") == "ok\xEF\xBF\xBD");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(HeadTail)

BOOST_AUTO_TEST_CASE(short_output_is_kept_whole) {
  HeadTailBuffer b(10, 10);
  b.Append("hello ");
  b.Append("world");
  BOOST_TEST(!b.truncated());
  BOOST_TEST(b.Text() == "hello world");
}

BOOST_AUTO_TEST_CASE(long_output_keeps_head_and_tail_with_marker) {
  HeadTailBuffer b(4, 4);
  for (int i = 0; i < 100; ++i) b.Append("0123456789");
  BOOST_TEST(b.truncated());
  BOOST_TEST(b.total_bytes() == 1000u);
  std::string text = b.Text();
  BOOST_TEST(text.substr(0, 4) == "0123");
  BOOST_TEST(text.substr(text.size() - 4) == "6789");
  BOOST_TEST(text.find("992 bytes of output omitted") != std::string::npos);
}

// The tail is trimmed only when it holds twice its cap: before that, a cut stream (the marker
// in Text()) still said it was whole (stdout_truncated false beside a cut stdout).
BOOST_AUTO_TEST_CASE(a_cut_is_reported_whenever_text_leaves_bytes_out) {
  for (size_t total = 1; total <= 40; ++total) {
    HeadTailBuffer b(4, 8);
    for (size_t i = 0; i < total; ++i) b.Append(std::string(1, static_cast<char>('a' + i % 26)));
    const bool cut = b.Text().find("bytes of output omitted") != std::string::npos;
    BOOST_TEST(b.truncated() == cut, total);
    BOOST_TEST(b.truncated() == (total > 12), total);
  }
}

BOOST_AUTO_TEST_CASE(one_huge_chunk_is_bounded) {
  HeadTailBuffer b(100, 100);
  b.Append(std::string(50'000'000, 'h'));
  BOOST_TEST(b.Text().size() < 400u);
}

BOOST_AUTO_TEST_SUITE_END()
