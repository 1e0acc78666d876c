#define BOOST_TEST_MODULE base64
#include "util/base64.h"

#include <boost/test/unit_test.hpp>

using sandrun::util::Base64Whitespace;
using sandrun::util::DecodeBase64;

BOOST_AUTO_TEST_CASE(decodes_rfc_4648_test_vectors) {
  // RFC 4648 section 10.
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"Zg==", "f"},
                                                         {"Zm8=", "fo"},
                                                         {"Zm9v", "foo"},
                                                         {"Zm9vYg==", "foob"},
                                                         {"Zm9vYmE=", "fooba"},
                                                         {"Zm9vYmFy", "foobar"}};
  for (const auto& [encoded, decoded] : vectors) {
    auto out = DecodeBase64(encoded);
    BOOST_TEST_REQUIRE(out.has_value(), encoded);
    BOOST_TEST(*out == decoded);
  }
  BOOST_TEST(*DecodeBase64("AAE=") == std::string("\0\1", 2));
}

BOOST_AUTO_TEST_CASE(refuses_what_is_not_base64) {
  for (const char* bad :
       {"abc", "ab=c", "a*bc", "====", "Zg===", "Z===", " Zg==", "Zg==\n", "Zm9v\nYmFy", "Zg-_"}) {
    BOOST_TEST(!DecodeBase64(bad).has_value(), bad);
  }
}

BOOST_AUTO_TEST_CASE(mime_bodies_may_break_lines) {
  auto png = DecodeBase64("iVBO\nRw0K\r\n", Base64Whitespace::kSkipped);
  BOOST_TEST_REQUIRE(png.has_value());
  BOOST_TEST(*png == "\x89PNG\r\n");
  BOOST_TEST(!DecodeBase64("iVBO\nRw0K", Base64Whitespace::kRefused).has_value());
  BOOST_TEST(!DecodeBase64("ab=c", Base64Whitespace::kSkipped).has_value());
  BOOST_TEST(!DecodeBase64("a*bc", Base64Whitespace::kSkipped).has_value());
}
