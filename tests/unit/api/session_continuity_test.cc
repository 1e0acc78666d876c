#define BOOST_TEST_MODULE SessionContinuity
// X-Sandrun-Session-Seen and session_restarted (api/session_continuity.h).
#include "api/session_continuity.h"

#include <boost/test/unit_test.hpp>

namespace sandrun::api {
namespace {

BOOST_AUTO_TEST_CASE(seen_header_values) {
  bool seen = true;
  BOOST_TEST(!DecodeSessionSeen("", &seen).has_value());
  BOOST_TEST(!seen);
  BOOST_TEST(!DecodeSessionSeen("1", &seen).has_value());
  BOOST_TEST(seen);
  BOOST_TEST(!DecodeSessionSeen("0", &seen).has_value());
  BOOST_TEST(!seen);
  for (const char* bad : {"yes", "true", "2", " 1", "1\r\n", "01"}) {
    auto err = DecodeSessionSeen(bad, &seen);
    BOOST_TEST_REQUIRE(err.has_value(), bad);
    BOOST_TEST(err->status == 400);
    BOOST_TEST(err->code == "wrong_type");
    BOOST_TEST(err->field == "X-Sandrun-Session-Seen");
  }
}

BOOST_AUTO_TEST_CASE(restarted_only_when_seen_and_created_here) {
  BOOST_TEST(SessionRestarted(true, true));
  BOOST_TEST(!SessionRestarted(true, false));  // the session is here: continued
  BOOST_TEST(!SessionRestarted(false, true));  // a first run: new, not lost
  BOOST_TEST(!SessionRestarted(false, false));
}

}  // namespace
}  // namespace sandrun::api
