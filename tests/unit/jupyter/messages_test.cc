#define BOOST_TEST_MODULE jupyter_messages
#include "jupyter/messages.h"

#include <boost/test/unit_test.hpp>

namespace sandrun::jupyter {
namespace {

BOOST_AUTO_TEST_SUITE(Messages)

BOOST_AUTO_TEST_CASE(a_client_message_needs_a_header_with_type_and_id) {
  for (const char* bad : {"", "[]", "{}", R"({"header":1})", R"({"header":{"msg_type":"x"}})",
                          R"({"header":{"msg_type":"x","msg_id":"1"},"content":[]})"}) {
    BOOST_TEST(!ParseClientMessage(bad).ok(), bad);
  }
  auto m = ParseClientMessage(R"({"header":{"msg_type":"execute_request","msg_id":"a"}})");
  BOOST_TEST_REQUIRE(m.ok());
  BOOST_TEST(m->channel == "shell");
  BOOST_TEST(m->msg_type == "execute_request");
  BOOST_TEST(m->content().IsObject());
}

BOOST_AUTO_TEST_CASE(a_message_to_the_client_names_its_parent_and_type_at_the_top) {
  auto request = ParseClientMessage(
      R"({"header":{"msg_type":"execute_request","msg_id":"abc"},"channel":"shell"})");
  BOOST_TEST_REQUIRE(request.ok());
  const std::string text = MessageToClient("iopub", "stream", request->header(),
                                           R"({"name":"stdout","text":"hi\n"})", "s1");
  rapidjson::Document d;
  d.Parse(text.c_str());
  BOOST_TEST_REQUIRE(d.IsObject());
  BOOST_TEST(std::string(d["msg_type"].GetString()) == "stream");
  BOOST_TEST(std::string(d["header"]["msg_type"].GetString()) == "stream");
  BOOST_TEST(std::string(d["parent_header"]["msg_id"].GetString()) == "abc");
  BOOST_TEST(std::string(d["channel"].GetString()) == "iopub");
  BOOST_TEST(std::string(d["content"]["text"].GetString()) == "hi\n");
  BOOST_TEST(std::string(d["msg_id"].GetString()) == d["header"]["msg_id"].GetString());
}

BOOST_AUTO_TEST_CASE(stdin_is_the_clients_stop_on_error_the_servers_and_code_a_string) {
  rapidjson::Document c;
  c.Parse(R"({"code":"1+1","allow_stdin":true,"silent":true})");
  auto content = KernelExecuteContent(c);
  BOOST_TEST_REQUIRE(content.ok());
  rapidjson::Document d;
  d.Parse(content->c_str());
  BOOST_TEST(d["allow_stdin"].GetBool());
  BOOST_TEST(std::string(d["sandrun_stdin"].GetString()) == "client");
  BOOST_TEST(!d["stop_on_error"].GetBool());  // the server aborts the queue (StopOnError)
  BOOST_TEST(StopOnError(c));
  BOOST_TEST(d["silent"].GetBool());
  BOOST_TEST(d["store_history"].GetBool());
  c.Parse(R"({"code":"1","stop_on_error":false})");
  BOOST_TEST(!StopOnError(c));
  d.Parse(KernelExecuteContent(c)->c_str());
  BOOST_TEST(!d["allow_stdin"].GetBool());
  c.Parse(R"({"code":5})");
  BOOST_TEST(!KernelExecuteContent(c).ok());
  c.Parse(R"({"value":7})");
  BOOST_TEST(InputReplyContent(c) == R"({"value":""})");
}

BOOST_AUTO_TEST_CASE(the_files_display_has_one_line_per_file_and_escapes_names) {
  std::vector<SkippedLink> skipped;
  for (int i = 0; i < 25; ++i) skipped.push_back({"s" + std::to_string(i), "too_many"});
  const std::string content = FilesDisplayContent(
      {{"a.csv", "http://h/files/u/r/a.csv?md5=x", 3}, {"x\n<b>.txt", "http://h/y", 1}}, skipped);
  rapidjson::Document d;
  d.Parse(content.c_str());
  BOOST_TEST_REQUIRE(!d.HasParseError());
  const std::string plain = d["data"]["text/plain"].GetString();
  BOOST_TEST(plain.rfind("a.csv: http://h/files/u/r/a.csv?md5=x\nx?<b>.txt: http://h/y\n", 0) == 0);
  BOOST_TEST(plain.find("s19: skipped (too_many)\n5 more files skipped\n") != std::string::npos);
  BOOST_TEST(plain.find("s20:") == std::string::npos);
  const std::string html = d["data"]["text/html"].GetString();
  BOOST_TEST(html.find("x?&lt;b&gt;.txt</a>") != std::string::npos);
  const std::string markdown = d["data"]["text/markdown"].GetString();
  BOOST_TEST(markdown.find("- [a\\.csv](<http://h/files/u/r/a.csv?md5=x>) (3 bytes)") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(forms_queries_and_cookies_are_parsed_as_browsers_send_them) {
  auto form = ParseForm("_xsrf=ab%2Fc&password=a+b%zz&empty&x=1&x=2");
  BOOST_TEST(form["_xsrf"] == "ab/c");
  BOOST_TEST(form["password"] == "a b%zz");
  BOOST_TEST(form.count("empty") == 1);
  BOOST_TEST(form["x"] == "1");
  BOOST_TEST(PercentDecode("%", false) == "%");
  BOOST_TEST(PercentDecode("%4", false) == "%4");
  BOOST_TEST(PercentDecode("a+b%41", false) == "a+bA");
  auto cookies = ParseCookies("_xsrf=1; sandrun-jupyter=abc;bad; =x");
  BOOST_TEST(cookies["_xsrf"] == "1");
  BOOST_TEST(cookies["sandrun-jupyter"] == "abc");
  BOOST_TEST(cookies.size() == 2u);
}

BOOST_AUTO_TEST_CASE(errors_have_jupyters_shape) {
  rapidjson::Document d;
  d.Parse(ErrorJson("no \"such\" kernel\n", "Not Found").c_str());
  BOOST_TEST(std::string(d["message"].GetString()) == "no \"such\" kernel\n");
  BOOST_TEST(std::string(d["reason"].GetString()) == "Not Found");
}

// sandrun's own notes reach the client as valid JSON of valid UTF-8, whatever the text holds
// (quotes, a backslash, a newline, a NUL, a byte that is no UTF-8).
BOOST_AUTO_TEST_CASE(sandruns_own_contents_are_json_of_valid_utf8) {
  const std::string hostile = std::string("a \"q\" \\ \n\x01") + '\0' + "\xff end";
  rapidjson::Document d;
  d.Parse(StreamContent("stderr", hostile).c_str());
  BOOST_TEST_REQUIRE(d.IsObject());
  BOOST_TEST(std::string(d["name"].GetString()) == "stderr");
  const std::string text(d["text"].GetString(), d["text"].GetStringLength());
  BOOST_TEST(text.find("a \"q\" \\ \n\x01") == 0u);
  BOOST_TEST(text.find('\xff') == std::string::npos);
  BOOST_TEST(text.find("\xef\xbf\xbd end") != std::string::npos);
  d.Parse(ErrorContent("SandrunStopped", hostile, "why").c_str());
  BOOST_TEST_REQUIRE(d.IsObject());
  BOOST_TEST(d["traceback"].Size() == 1u);
  d.Parse(ErrorReplyContent(3, "E", "v").c_str());
  BOOST_TEST(std::string(d["status"].GetString()) == "error");
  BOOST_TEST(d["execution_count"].GetInt() == 3);
  BOOST_TEST(d["traceback"].Size() == 0u);
  d.Parse(StatusContent("idle").c_str());
  BOOST_TEST(std::string(d["execution_state"].GetString()) == "idle");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace sandrun::jupyter
