// The fake internet of the network suites (fake_internet.py), up for a whole suite: a network
// namespace joined to the host by a veth pair, holding a PEP 503 index with wheels the test
// builds and, unless index_only, listeners on addresses a run must never reach. Suites that
// may run at once use different octets (198.18.<octet>.0/24); only one may have the refused
// listeners (their addresses are fixed). Used as a Boost.Test suite fixture.
#pragma once

#include <rapidjson/document.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <string>
#include <utility>
#include <vector>

namespace sandrun::integration {

// Output of a shell command (stdout), and its exit status.
inline std::string Shell(const std::string& command, int* status = nullptr) {
  std::string out;
  if (FILE* p = ::popen(command.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = ::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    const int rc = ::pclose(p);
    if (status != nullptr) *status = rc;
  }
  return out;
}

struct FakeInternet {
  std::string name = "sandrun-it-net-" + std::to_string(::getpid());
  std::string dir;
  std::string script = std::string(SANDRUN_SOURCE_DIR) + "/tests/integration/fake_internet.py";
  std::string env;  // FAKE_INTERNET_* of this one
  rapidjson::Document topology;
  static inline FakeInternet* current = nullptr;

  explicit FakeInternet(int octet = 77, bool index_only = false) {
    env = "FAKE_INTERNET_OCTET=" + std::to_string(octet) +
          " FAKE_INTERNET_INDEX_ONLY=" + (index_only ? "1" : "0") + " ";
    char tmpl[] = "/tmp/sandrun-fake-internet-XXXXXX";
    dir = ::mkdtemp(tmpl);
    int status = 0;
    const std::string json = Shell(env + "python3 " + script + " up " + name + " " + dir, &status);
    topology.Parse(json.c_str());
    if (status != 0 || topology.HasParseError() || !topology.IsObject()) {
      Down();
      BOOST_FAIL("fake_internet.py up failed (" << status << "): " << json);
    }
    current = this;
  }
  ~FakeInternet() {
    Down();
    current = nullptr;
  }
  void Down() {
    (void)Shell(env + "python3 " + script + " down " + name + " " + dir);
    (void)Shell("rm -rf " + dir);
  }
  std::string S(const char* key) const { return topology[key].GetString(); }
  std::vector<std::pair<std::string, std::string>> Refused() const {
    std::vector<std::pair<std::string, std::string>> out;
    for (auto it = topology["refused"].MemberBegin(); it != topology["refused"].MemberEnd(); ++it) {
      out.emplace_back(it->name.GetString(), it->value.GetString());
    }
    return out;
  }
  // What the index's http.server logged (one line per request).
  std::string IndexLog() const { return Shell("cat " + dir + "/servers.log"); }
};

inline const FakeInternet& Net() {
  BOOST_TEST_REQUIRE(FakeInternet::current != nullptr);
  return *FakeInternet::current;
}

}  // namespace sandrun::integration
