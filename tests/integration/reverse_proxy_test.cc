// Download links behind reverse proxies (DESIGN.md §4): with no public_url, links follow the
// X-Forwarded-Proto/-Host/-Prefix headers only of a trusted proxy (nginx realip + geo), and
// the shipped example nginx/examples/path-prefix.conf serves sandrun under /sandbox/.
//
// Its ctest entry runs the stack with public_url "" and trusted_proxies "127.0.0.1"; requests
// sent from 127.0.0.2 stand for any other client. Also: who may read /healthz, /readyz and
// /metrics (health_allow "198.51.100.0/24", one bearer token).
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>

#include "artifact_helpers.h"
#include "helpers.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

constexpr char kUntrusted[] = "127.0.0.2";

const Headers kForwarded = {{"X-Forwarded-Proto", "https"},
                            {"X-Forwarded-Host", "sandrun.example.org"},
                            {"X-Forwarded-Prefix", "/sandbox"},
                            {"X-Forwarded-For", "203.0.113.7"}};

std::string RunOneFile(const Headers& headers, const std::string& source_ip = "") {
  HttpResponse response =
      PostWith("/run", PythonRequest("open('p.txt', 'w').write('proxied')\n", "proxied"), headers,
               source_ip);
  BOOST_REQUIRE_MESSAGE(response.status == 200, response.status << ": " << response.body);
  rapidjson::Document doc = ParseJson(response.body);
  BOOST_REQUIRE(ListSize(doc, "files") == 1);
  return Str(doc["files"][0], "url");
}

// The path and query of a link whose base is `base`.
std::string AfterBase(const std::string& url, const std::string& base) {
  BOOST_REQUIRE_MESSAGE(url.rfind(base + "/files/", 0) == 0,
                        "link '" << url << "' is not under " << base << "/files/");
  return url.substr(base.size());
}

// A second nginx, the "front" of a site, running the shipped example on its own port.
class FrontNginx {
 public:
  FrontNginx() {
    Stack& stack = Stack::Get();
    dir_ = stack.state_dir() + "/front";
    std::filesystem::create_directories(dir_ + "/logs");
    std::filesystem::create_directories(dir_ + "/tmp");
    port_ = FreePort();
    std::string example =
        ReadFile(std::string(SANDRUN_SOURCE_DIR) + "/nginx/examples/path-prefix.conf");
    BOOST_REQUIRE(!example.empty());
    example = std::regex_replace(example, std::regex("listen 80;"),
                                 "listen 127.0.0.1:" + std::to_string(port_) + ";");
    example = std::regex_replace(example, std::regex("127\\.0\\.0\\.1:8080"),
                                 "127.0.0.1:" + std::to_string(stack.port()));
    std::ofstream(dir_ + "/site.conf") << example;
    std::ofstream(dir_ + "/nginx.conf")
        << "worker_processes 1;\npid " << dir_ << "/nginx.pid;\nerror_log " << dir_
        << "/logs/error.log;\nevents {}\nhttp {\n  access_log " << dir_
        << "/logs/access.log;\n  client_body_temp_path " << dir_ << "/tmp;\n  proxy_temp_path "
        << dir_ << "/tmp;\n  include " << dir_ << "/site.conf;\n}\n";
    const pid_t parent = getpid();
    pid_ = fork();
    BOOST_REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      execlp("nginx", "nginx", "-p", (dir_ + "/").c_str(), "-c", (dir_ + "/nginx.conf").c_str(),
             "-g", "daemon off; master_process off;", static_cast<char*>(nullptr));
      _exit(127);
    }
    // Wait until it answers (its 404 for /) or gives up.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      httplib::Client client("127.0.0.1", port_);
      client.set_connection_timeout(1, 0);
      if (client.Get("/")) return;
      int status = 0;
      BOOST_REQUIRE_MESSAGE(waitpid(pid_, &status, WNOHANG) == 0,
                            "front nginx exited: " << ReadFile(dir_ + "/logs/error.log"));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    BOOST_FAIL("front nginx did not answer: " << ReadFile(dir_ + "/logs/error.log"));
  }
  ~FrontNginx() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  int port() const { return port_; }

 private:
  // Like the stack's own port: the kernel's pick, free now.
  static int FreePort() {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    BOOST_REQUIRE(fd >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
    close(fd);
    BOOST_REQUIRE(ok);
    return ntohs(addr.sin_port);
  }
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(ReverseProxy)

BOOST_AUTO_TEST_CASE(links_follow_the_host_header_without_a_proxy) {
  const std::string base = Stack::Get().base_url();
  const std::string url = RunOneFile({});
  const HttpResponse download = Get(AfterBase(url, base));
  BOOST_TEST(download.status == 200);
  BOOST_TEST(download.body == "proxied");
}

BOOST_AUTO_TEST_CASE(forwarded_headers_of_an_untrusted_client_are_ignored) {
  const std::string url = RunOneFile(kForwarded, kUntrusted);
  // Built on the Host the client sent, not on what it claimed to be forwarded from.
  BOOST_TEST(url.rfind(Stack::Get().base_url() + "/files/", 0) == 0u, url);
  BOOST_TEST(url.find("sandrun.example.org") == std::string::npos);
  BOOST_TEST(url.find("/sandbox") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(forwarded_headers_of_a_trusted_proxy_build_the_links) {
  const std::string url = RunOneFile(kForwarded);
  const std::string base = "https://sandrun.example.org/sandbox";
  // Signed for /files/..., which is what this nginx sees once the proxy strips /sandbox.
  const HttpResponse download = Get(AfterBase(url, base));
  BOOST_TEST(download.status == 200);
  BOOST_TEST(download.body == "proxied");
}

BOOST_AUTO_TEST_CASE(malformed_forwarded_values_fall_back_even_from_a_trusted_proxy) {
  const std::string url = RunOneFile({{"X-Forwarded-Proto", "javascript"},
                                      {"X-Forwarded-Host", "evil.example/x?"},
                                      {"X-Forwarded-Prefix", "/a/../b"}});
  BOOST_TEST(url.rfind(Stack::Get().base_url() + "/files/", 0) == 0u, url);
}

BOOST_AUTO_TEST_CASE(shipped_path_prefix_example_serves_sandrun_under_sandbox) {
  FrontNginx front;
  const std::string front_base = "http://127.0.0.1:" + std::to_string(front.port());
  const HttpResponse run =
      PostWith("/sandbox/run", PythonRequest("open('via proxy.csv', 'w').write('a,b\\n')\n"), {},
               "", front.port());
  BOOST_REQUIRE_MESSAGE(run.status == 200, run.status << ": " << run.body);
  rapidjson::Document doc = ParseJson(run.body);
  BOOST_REQUIRE(ListSize(doc, "files") == 1);
  const std::string url = Str(doc["files"][0], "url");
  const std::string path = AfterBase(url, front_base + "/sandbox");
  // Downloaded through the front nginx, with sandrun's headers intact.
  const HttpResponse download = GetWith("/sandbox" + path, {}, "", front.port());
  BOOST_TEST(download.status == 200);
  BOOST_TEST(download.body == "a,b\n");
  BOOST_TEST(RawHeaders("/sandbox" + path, front.port())["content-disposition"] ==
             "attachment; filename*=UTF-8''via%20proxy.csv");
  BOOST_TEST(download.Header("X-Content-Type-Options") == "nosniff");
  BOOST_TEST(download.Header("Content-Security-Policy") == "sandbox; default-src 'none'");
  // Signature checks and JSON errors come through as well.
  const HttpResponse unsigned_get =
      GetWith("/sandbox" + path.substr(0, path.find('?')), {}, "", front.port());
  BOOST_TEST(unsigned_get.status == 403);
  BOOST_TEST(ParseServiceError(unsigned_get.body).code == "forbidden");
}

// /healthz, /readyz and /metrics answer this host, health_allow (198.51.100.0/24 in this
// suite's config) and bearer tokens only. The client's address is nginx's: the peer, or the
// client a trusted proxy (127.0.0.1 here) names last in X-Forwarded-For, which an attacker
// behind it cannot choose (entries it wrote itself come before the proxy's).
BOOST_AUTO_TEST_CASE(health_and_metrics_answer_only_this_host_the_allow_list_and_tokens) {
  for (const char* path : {"/healthz", "/readyz", "/metrics"}) {
    // This host: the stack's own health waits (scripts/serve) poll from 127.0.0.1.
    BOOST_TEST(GetWith(path, {}).status == 200, path);
    BOOST_TEST(GetWith(path, {}, kUntrusted).status == 200, path);
    // An untrusted client's X-Forwarded-For changes nothing: still its own (loopback) address.
    BOOST_TEST(GetWith(path, {{"X-Forwarded-For", "203.0.113.7"}}, kUntrusted).status == 200);
    // A client elsewhere, through the trusted proxy: refused, with the key to change.
    const HttpResponse far = GetWith(path, {{"X-Forwarded-For", "203.0.113.7"}});
    BOOST_TEST(far.status == 403, path << ": " << far.status << " " << far.body);
    const ServiceError error = ParseServiceError(far.body);
    BOOST_TEST(error.code == "forbidden");
    BOOST_TEST(error.field == "health_allow");
    BOOST_TEST(error.message.find("203.0.113.7") != std::string::npos, error.message);
    BOOST_TEST(far.body.find("sandrun_runs_total") == std::string::npos);
    // It cannot name an allowed address before the proxy's entry.
    BOOST_TEST(GetWith(path, {{"X-Forwarded-For", "198.51.100.9, 203.0.113.7"}}).status == 403,
               path);
    // An allowed client, and any client with a bearer token; an unknown token is none.
    BOOST_TEST(GetWith(path, {{"X-Forwarded-For", "203.0.113.7, 198.51.100.9"}}).status == 200,
               path);
    BOOST_TEST(GetWith(path, {{"X-Forwarded-For", "203.0.113.7"},
                              {"Authorization", "Bearer tok-health-0123456789abcdef"}})
                       .status == 200,
               path);
    BOOST_TEST(GetWith(path, {{"X-Forwarded-For", "203.0.113.7"},
                              {"Authorization", "Bearer tok-health-wrong"}})
                       .status == 403,
               path);
  }
  // Runs are not health: the far client may still run code (anonymous use is allowed here).
  BOOST_TEST(
      PostWith("/run", PythonRequest("print(1)\n"), {{"X-Forwarded-For", "203.0.113.7"}}).status ==
      200);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
