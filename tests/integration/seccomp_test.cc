// The seccomp filter from inside a real sandbox, through nginx: the probe program
// (tests/probe) is uploaded as an input file and calls every refused syscall.
#include <openssl/evp.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <boost/test/unit_test.hpp>
#include <fstream>
#include <sstream>

#include "helpers.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

std::string Base64(const std::string& data) {
  std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(data.data()),
                          static_cast<int>(data.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// Runs `command` with the probe uploaded as ./probe.
rapidjson::Document RunWithProbe(const std::string& command) {
  std::ifstream in(SANDRUN_PROBE_PATH, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  BOOST_REQUIRE_MESSAGE(!bytes.str().empty(), "probe not built: " << SANDRUN_PROBE_PATH);
  rapidjson::StringBuffer body;
  rapidjson::Writer<rapidjson::StringBuffer> w(body);
  w.StartObject();
  w.Key("language");
  w.String("bash");
  w.Key("files");
  w.StartArray();
  w.StartObject();
  w.Key("path");
  w.String("probe");
  w.Key("content_base64");
  w.String(Base64(bytes.str()).c_str());
  w.EndObject();
  w.EndArray();
  w.Key("code");
  w.String(("chmod +x probe\n" + command).c_str());
  w.EndObject();
  return PostRun(body.GetString());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(Seccomp)

BOOST_AUTO_TEST_CASE(every_refused_syscall_answers_eperm) {
  auto doc = RunWithProbe("./probe seccomp\n./probe try-syscall all");
  const std::string out = Str(doc, "stdout");
  BOOST_TEST(out.find("Seccomp:\t2") != std::string::npos, out);
  BOOST_TEST(out.find("NoNewPrivs:\t1") != std::string::npos, out);
  std::istringstream lines(out);
  std::string name, result;
  int probes = 0;
  while (lines >> name >> result) {
    if (name.rfind("Seccomp", 0) == 0 || name.rfind("NoNewPrivs", 0) == 0) continue;
    ++probes;
    BOOST_TEST(result == "EPERM", name << " answered " << result);
  }
  BOOST_TEST(probes >= 40, "only " << probes << " syscalls probed: " << out);
}

BOOST_AUTO_TEST_CASE(the_32_bit_abi_kills_the_process) {
  auto doc = RunWithProbe("./probe int80\necho \"rc=$?\"");
  const std::string out = Str(doc, "stdout");
  BOOST_TEST(out.find("int80 returned") == std::string::npos, out);
  BOOST_TEST(out.find("rc=159") != std::string::npos, out);  // 128 + SIGSYS
}

BOOST_AUTO_TEST_CASE(ordinary_programs_still_work) {
  auto doc = PostRun(
      R"j({"language":"python","code":"import threading, subprocess, numpy, concurrent.futures as cf\nwith cf.ThreadPoolExecutor(8) as ex:\n    print(sum(ex.map(lambda i: int(numpy.arange(i).sum()), range(100))))\nprint(subprocess.run(['bash', '-c', 'echo sub; ls / | wc -l'], capture_output=True, text=True).stdout.split()[0])\nimport multiprocessing as mp\nwith mp.Pool(2) as p:\n    print(p.map(abs, [-1, -2]))\n"})j");
  BOOST_TEST(Str(doc, "status") == "ok", Str(doc, "stderr"));
  BOOST_TEST(Str(doc, "stdout") == "161700\nsub\n[1, 2]\n");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
