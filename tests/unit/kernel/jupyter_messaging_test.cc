// Jupyter messaging at the wire level (kernel/jupyter_messaging.h). No kernel needed.
#define BOOST_TEST_MODULE kernel_pure
#include "kernel/jupyter_messaging.h"

#include <boost/test/unit_test.hpp>

namespace kernel = sandrun::kernel;

BOOST_AUTO_TEST_SUITE(JupyterMessaging)

BOOST_AUTO_TEST_CASE(signs_with_hmac_sha256_over_the_joined_parts) {
  // RFC 4231 test case 2, the data split in parts as a message's four frames are.
  BOOST_TEST(kernel::SignParts("Jefe", {"what do ya", " want ", "for nothing", "?"}) ==
             "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

BOOST_AUTO_TEST_CASE(encoded_frames_decode_back_and_are_signed) {
  kernel::OutgoingMessage m;
  m.msg_id = "id-1";
  m.session = "s";
  m.msg_type = "execute_request";
  m.content_json = kernel::ExecuteRequestContent("print(\"hi\")\n");
  m.date = "2026-12-01T00:00:00.000000Z";
  auto frames = kernel::EncodeMessage(m, "k3y");
  BOOST_TEST_REQUIRE(frames.size() == 6u);
  BOOST_TEST(frames[0] == kernel::kDelimiter);
  BOOST_TEST(frames[1] == kernel::SignParts("k3y", {frames[2], frames[3], frames[4], frames[5]}));
  // A kernel's reply names the request as parent; identities before the delimiter skipped.
  std::vector<std::string> reply = {"ident",
                                    kernel::kDelimiter,
                                    "",
                                    R"({"msg_type": "execute_reply", "msg_id": "r"})",
                                    R"({"msg_id": "id-1"})",
                                    "{}",
                                    R"({"status": "ok", "execution_count": 3})"};
  reply[2] = kernel::SignParts("k3y", {reply[3], reply[4], reply[5], reply[6]});
  auto decoded = kernel::DecodeMessage(reply, "k3y");
  BOOST_TEST_REQUIRE(decoded.ok());
  BOOST_TEST(decoded->msg_type == "execute_reply");
  BOOST_TEST(decoded->parent_msg_id == "id-1");
  BOOST_TEST(decoded->content["execution_count"].GetInt() == 3);
  auto code = kernel::DecodeMessage(reply, "other-key");
  BOOST_TEST(!code.ok());
}

BOOST_AUTO_TEST_CASE(refuses_malformed_messages) {
  auto sign = [](std::vector<std::string> f) {
    f[1] = kernel::SignParts("k", {f[2], f[3], f[4], f[5]});
    return f;
  };
  const std::string d = kernel::kDelimiter;
  BOOST_TEST(!kernel::DecodeMessage({"a", "b"}, "k").ok());           // no delimiter
  BOOST_TEST(!kernel::DecodeMessage({d, "", "{}", "{}"}, "k").ok());  // too few frames
  BOOST_TEST(!kernel::DecodeMessage(sign({d, "", "[]", "{}", "{}", "{}"}), "k").ok());
  BOOST_TEST(!kernel::DecodeMessage(sign({d, "", "{}", "{}", "{}", "{}"}), "k").ok());  // no type
  BOOST_TEST(!kernel::DecodeMessage(sign({d, "", R"({"msg_type":"x"})", "{}", "{}", "1"}), "k")
                  .ok());  // content not an object
  BOOST_TEST(
      kernel::DecodeMessage(sign({d, "", R"({"msg_type":"x"})", "{}", "{}", "{}"}), "k").ok());
}

BOOST_AUTO_TEST_CASE(strips_ansi_escapes_from_tracebacks) {
  BOOST_TEST(kernel::StripAnsi("\x1b[0;31mZeroDivisionError\x1b[0m: x") == "ZeroDivisionError: x");
  BOOST_TEST(kernel::StripAnsi("a\x1b]0;title\x07"
                               "b\x1b]8;;u\x1b\\c") == "abc");
  BOOST_TEST(kernel::StripAnsi("plain\x1b") == "plain");
  BOOST_TEST(kernel::StripAnsi("\x1b(Bx") == "Bx");  // two-byte escape: ESC (
}

BOOST_AUTO_TEST_CASE(connection_file_names_ipc_sockets_and_the_key) {
  const std::string json = kernel::ConnectionFileJson("/tmp/.sandrun-kernel/k", "abc");
  BOOST_TEST(json.find(R"("transport":"ipc")") != std::string::npos);
  BOOST_TEST(json.find(R"("ip":"/tmp/.sandrun-kernel/k")") != std::string::npos);
  BOOST_TEST(json.find(R"("shell_port":1)") != std::string::npos);
  BOOST_TEST(json.find(R"("signature_scheme":"hmac-sha256")") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
