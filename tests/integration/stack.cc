#include "stack.h"

#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/tree/observer.hpp>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "helpers.h"
#include "host_state.h"

extern char** environ;

namespace sandrun::integration {
namespace {

Stack* g_stack = nullptr;

// Start-up includes the daemon's sandbox self-test.
constexpr int kHealthTimeoutS = 120;
// scripts/serve gives sandrund 30 s after SIGTERM before SIGKILL.
constexpr int kStopTimeoutS = 60;

// A loopback TCP port that is free now (the kernel picks it; a race with another program
// binding it before nginx does is possible but unlikely).
int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string error = std::strerror(errno);
    close(fd);
    throw std::runtime_error("bind/getsockname on 127.0.0.1:0: " + error);
  }
  close(fd);
  return ntohs(addr.sin_port);
}

std::string ReadLink(const std::string& path) {
  char buf[256];
  ssize_t n = readlink(path.c_str(), buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

std::string Tail(const std::string& path, size_t max_bytes = 4000) {
  std::string text = ReadFile(path);
  if (text.size() > max_bytes) text = "..." + text.substr(text.size() - max_bytes);
  return "----- " + path + " -----\n" + text + "\n";
}

// Notes whether any check failed, to keep the state directory for inspection. (The results
// collector has not summed up the master suite yet when the global fixture tears down.)
class FailureObserver : public boost::unit_test::test_observer {
 public:
  void assertion_result(boost::unit_test::assertion_result result) override {
    if (result != boost::unit_test::AR_PASSED) failed_ = true;
  }
  void exception_caught(const boost::execution_exception&) override { failed_ = true; }
  void test_unit_aborted(const boost::unit_test::test_unit&) override { failed_ = true; }
  bool failed() const { return failed_; }

 private:
  bool failed_ = false;
};
FailureObserver g_failures;

}  // namespace

Stack::Stack() { g_stack = this; }

Stack::~Stack() { g_stack = nullptr; }

Stack& Stack::Get() {
  if (g_stack == nullptr || g_stack->serve_pid_ < 0) {
    throw std::logic_error("the integration stack is not running");
  }
  return *g_stack;
}

std::string Stack::base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }

void Stack::setup() {
  boost::unit_test::framework::register_observer(g_failures);
  // In /tmp (short: the FastCGI socket path must fit in sun_path) and mode 0755 so that
  // scripts/serve can run nginx's workers as www-data.
  char dir[] = "/tmp/sandrun-it.XXXXXX";
  if (mkdtemp(dir) == nullptr) {
    throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  }
  chmod(dir, 0755);
  state_dir_ = dir;
  port_ = FreeLoopbackPort();
  // An even uid in 70000..89998 derived from the port: distinct per concurrent stack.
  sandbox_uid_ = static_cast<uid_t>(70000 + 2 * (port_ % 10000));
  std::cerr << "integration stack: state " << state_dir_ << ", port " << port_ << std::endl;
  WriteTestConfig(state_dir_ + "/test-config.json");
  // Served by nginx at /_test/ (scripts/serve renders that location only when asked).
  mkdir(test_pages_dir().c_str(), 0755);
  chmod(test_pages_dir().c_str(), 0755);
  StartServe();
  WaitHealthy();
  // scripts/serve's example run has answered; its teardown (directory, mount, cgroup) follows
  // the answer: a test that counts what runs left must not meet it (host_state.h).
  (void)WaitForRunsGone(10);
}

void Stack::WriteTestConfig(const std::string& path) const {
  // Merged over scripts/serve's generated config (SANDRUN_CONFIG_EXTRA). The ceilings leave
  // room for every case here; links live long enough for a slow run of the suite.
  std::ostringstream out;
  out << R"({
  "link_ttl_s": )"
      << kLinkTtlS << R"(,
  "sandbox_uid": )"
      << sandbox_uid_ << R"(,
  "sandbox_gid": )"
      << sandbox_uid_ << R"(,
  "network_uid": )"
      << network_uid() << R"(,
  "cgroup_name": ")"
      << cgroup_name() << R"(",
  "session_wait_s": 3,
  "max_concurrent_runs": 2,
  "ceilings": {"wall_time_s": 60, "cpu_time_s": 60, "memory_mb": 2048}
}
)";
  // A suite's own keys (its ctest entry sets SANDRUN_IT_CONFIG to a JSON object): small
  // quotas, short ages, trusted proxies. They replace the keys above of the same name.
  rapidjson::Document config;
  config.Parse(out.str().c_str());
  if (const char* extra_text = std::getenv("SANDRUN_IT_CONFIG")) {
    rapidjson::Document extra;
    extra.Parse(extra_text);
    if (extra.HasParseError() || !extra.IsObject()) {
      throw std::runtime_error(std::string("SANDRUN_IT_CONFIG is not a JSON object: ") +
                               extra_text);
    }
    for (auto& member : extra.GetObject()) {
      config.RemoveMember(member.name);
      config.AddMember(rapidjson::Value(member.name, config.GetAllocator()),
                       rapidjson::Value(member.value, config.GetAllocator()),
                       config.GetAllocator());
    }
  }
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  config.Accept(writer);
  std::ofstream file(path);
  file << buffer.GetString() << "\n";
  if (!file) throw std::runtime_error("cannot write " + path);
}

void Stack::StartServe() {
  const std::string serve = std::string(SANDRUN_SOURCE_DIR) + "/scripts/serve";
  const std::string log = state_dir_ + "/serve.log";

  // Everything the child needs is prepared before fork().
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (name == "PORT" || name == "SANDRUN_STATE_DIR" || name == "SANDRUN_SKIP_INSTALL" ||
        name == "SANDRUN_SKIP_BUILD" || name == "SANDRUN_BUILD_DIR" ||
        name == "SANDRUN_CONFIG_EXTRA" || name == "SANDRUN_TEST_PAGES_DIR") {
      continue;
    }
    env_strings.push_back(entry);
  }
  env_strings.push_back("PORT=" + std::to_string(port_));
  env_strings.push_back("SANDRUN_STATE_DIR=" + state_dir_);
  env_strings.push_back("SANDRUN_SKIP_INSTALL=1");
  env_strings.push_back("SANDRUN_SKIP_BUILD=1");
  env_strings.push_back(std::string("SANDRUN_BUILD_DIR=") + SANDRUN_BUILD_DIR);
  env_strings.push_back("SANDRUN_CONFIG_EXTRA=" + state_dir_ + "/test-config.json");
  env_strings.push_back("SANDRUN_TEST_PAGES_DIR=" + test_pages_dir());
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string bash = "/bin/bash";
  std::vector<char*> argv = {bash.data(), const_cast<char*>(serve.c_str()), nullptr};

  const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (log_fd < 0 || null_fd < 0) throw std::runtime_error("cannot open " + log);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // Own process group, so a last-resort kill reaches everything; SIGTERM when this test
    // process dies (even by SIGKILL from a ctest timeout), which scripts/serve turns into a
    // clean stop of nginx and sandrund.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    dup2(null_fd, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(log_fd);
  close(null_fd);
  serve_pid_ = pid;
}

void Stack::WaitHealthy() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kHealthTimeoutS);
  std::string last = "no answer";
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(serve_pid_, &status, WNOHANG) == serve_pid_) {
      serve_pid_ = -1;
      const std::string how = WIFEXITED(status)
                                  ? "exit status " + std::to_string(WEXITSTATUS(status))
                                  : "signal " + std::to_string(WTERMSIG(status));
      throw std::runtime_error("scripts/serve exited during start-up (" + how + ")\n" + LogTails());
    }
    httplib::Client client("127.0.0.1", port_);
    client.set_connection_timeout(2, 0);
    client.set_read_timeout(10, 0);
    if (auto res = client.Get("/healthz")) {
      // Healthy, and scripts/serve's own example run (a python print(1)) answered: a test
      // that counts runs or the warm pool's hits must not meet it half-way.
      const bool example_done =
          ReadFile(state_dir_ + "/serve.log").find("\nanswered:") != std::string::npos;
      if (res->status == 200 && example_done) return;
      last = std::to_string(res->status) + " " + res->body +
             (example_done ? "" : " (scripts/serve's example run not answered yet)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  teardown();
  throw std::runtime_error("GET /healthz did not answer 200 within " +
                           std::to_string(kHealthTimeoutS) + " s (last: " + last + ")\n" +
                           LogTails());
}

int64_t Stack::ConfigInt(const std::string& key) const {
  // The generated config starts with comment lines, which RapidJSON can skip.
  const std::string text = ReadFile(state_dir_ + "/sandrun.jsonc");
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseCommentsFlag>(text.c_str());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember(key.c_str()) ||
      !doc[key.c_str()].IsInt64()) {
    throw std::runtime_error("no integer '" + key + "' in " + state_dir_ + "/sandrun.jsonc");
  }
  return doc[key.c_str()].GetInt64();
}

std::string Stack::LinkSecret() const {
  const std::string text = ReadFile(state_dir_ + "/link_secret.conf");
  std::smatch match;
  static const std::regex kLine(R"re(set \$sandrun_link_secret "([0-9a-f]{64})";)re");
  if (!std::regex_search(text, match, kLine)) {
    throw std::runtime_error("no secret in " + state_dir_ + "/link_secret.conf");
  }
  return match[1];
}

std::string Stack::LogTails() const {
  return Tail(state_dir_ + "/serve.log") + Tail(state_dir_ + "/logs/sandrund.log") +
         Tail(state_dir_ + "/nginx/logs/error.log");
}

std::vector<pid_t> Stack::StackPids() const {
  std::vector<pid_t> pids;
  for (pid_t pid : StackProcesses(state_dir_)) {
    if (pid != getpid() && pid != serve_pid_) pids.push_back(pid);
  }
  return pids;
}

bool Stack::WaitServeExit(int timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    const pid_t r = waitpid(serve_pid_, &status, WNOHANG);
    if (r == serve_pid_ || (r < 0 && errno == ECHILD)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

pid_t Stack::DaemonPid() const {
  const std::string config_arg = state_dir_ + "/sandrun.jsonc";
  for (const auto& [pid, argv] : ProcessArgvs()) {
    if (argv.empty() || argv[0].find("sandrund") == std::string::npos) continue;
    // Not a sandbox (own user namespace) nor a helper: the daemon runs in ours.
    if (ReadLink("/proc/" + std::to_string(pid) + "/ns/user") != ReadLink("/proc/self/ns/user")) {
      continue;
    }
    for (size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == "--config" && argv[i + 1] == config_arg) return pid;
    }
  }
  return -1;
}

void Stack::Restart() {
  if (serve_pid_ >= 0 && !WaitServeExit(30)) {
    kill(serve_pid_, SIGTERM);
    WaitServeExit(kStopTimeoutS);
  }
  serve_pid_ = -1;
  StartServe();
  WaitHealthy();
}

void Stack::teardown() {
  if (serve_pid_ < 0) return;
  const std::vector<pid_t> before = StackPids();
  kill(serve_pid_, SIGTERM);
  const bool stopped = WaitServeExit(kStopTimeoutS);
  if (!stopped) {
    kill(-serve_pid_, SIGKILL);
    WaitServeExit(5);
  }
  serve_pid_ = -1;
  BOOST_TEST(stopped, "scripts/serve stopped within " << kStopTimeoutS << " s of SIGTERM");

  // Nothing of this stack may be left: the pids seen before, and anything naming its state
  // directory now.
  std::vector<pid_t> left;
  for (pid_t pid : before) {
    if (ProcessAlive(pid)) left.push_back(pid);
  }
  for (pid_t pid : StackPids()) {
    if (ProcessAlive(pid)) left.push_back(pid);
  }
  for (pid_t pid : left) {
    const auto argvs = ProcessArgvs();
    const auto it = argvs.find(pid);
    BOOST_ERROR("process " << pid << " ("
                           << (it == argvs.end() || it->second.empty() ? "?" : it->second[0])
                           << ") of the stack is still running after scripts/serve stopped");
    kill(pid, SIGKILL);
  }

  if (g_failures.failed() || !left.empty() || std::getenv("SANDRUN_KEEP_STATE") != nullptr) {
    std::cerr << "integration stack: kept " << state_dir_ << " for inspection\n"
              << LogTails() << std::endl;
  } else {
    std::error_code ec;
    std::filesystem::remove_all(state_dir_, ec);
  }
  boost::unit_test::framework::deregister_observer(g_failures);
}

}  // namespace sandrun::integration
