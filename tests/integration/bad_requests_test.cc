// Requests the service refuses: 4xx with {"error":{"code","message","field"}} (DESIGN.md §2).
#include <boost/test/unit_test.hpp>
#include <string>

#include "helpers.h"

namespace sandrun::integration {

BOOST_AUTO_TEST_SUITE(BadRequests)

BOOST_AUTO_TEST_CASE(truncated_json_is_400_with_a_message) {
  HttpResponse response = Post("/run", R"json({"language":)json");
  BOOST_TEST(response.status == 400);
  ServiceError error = ParseServiceError(response.body);
  BOOST_TEST(!error.code.empty());
  BOOST_TEST(!error.message.empty());
}

BOOST_AUTO_TEST_CASE(unknown_field_is_400_naming_it) {
  HttpResponse response =
      Post("/run", R"json({"language":"python","code":"print(1)","bogus_field":1})json");
  BOOST_TEST(response.status == 400);
  ServiceError error = ParseServiceError(response.body);
  BOOST_TEST(
      (error.field == "bogus_field" || error.message.find("bogus_field") != std::string::npos),
      "error names the field: " << response.body);
}

// processes counts sandrun's init and the program: 1 could never run anything. It was a 500
// "sandbox setup failed at fork program"; now it is refused up front, naming the limit.
BOOST_AUTO_TEST_CASE(one_process_is_400_naming_the_limit) {
  HttpResponse response =
      Post("/run", R"json({"language":"bash","code":"echo hi","limits":{"processes":1}})json");
  BOOST_TEST(response.status == 400, response.body);
  ServiceError error = ParseServiceError(response.body);
  BOOST_TEST(error.field == "limits.processes", response.body);
}

BOOST_AUTO_TEST_CASE(unknown_language_is_400) {
  HttpResponse response = Post("/run", R"json({"language":"cobol","code":"DISPLAY 'HI'."})json");
  BOOST_TEST(response.status == 400);
  ServiceError error = ParseServiceError(response.body);
  BOOST_TEST((error.field == "language" || error.message.find("cobol") != std::string::npos),
             "error names the language: " << response.body);
}

BOOST_AUTO_TEST_CASE(unknown_path_is_404_json) {
  HttpResponse response = Get("/no/such/endpoint");
  BOOST_TEST(response.status == 404);
  BOOST_TEST(response.Header("Content-Type").rfind("application/json", 0) == 0);
  BOOST_TEST(response.Header("X-Content-Type-Options") == "nosniff");
  BOOST_TEST(ParseServiceError(response.body).code == "not_found");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
