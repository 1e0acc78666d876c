// The local stack under test: nginx in front of sandrund, both started by scripts/serve with
// SANDRUN_SKIP_INSTALL=1 SANDRUN_SKIP_BUILD=1 (the daemon of this build tree), on a free
// loopback port, with a temporary state directory and a test config.
//
// Used as the Boost.Test global fixture (main.cc): setup() starts the stack and waits for
// GET /healthz; teardown() sends SIGTERM to scripts/serve and checks that no nginx or sandrund
// of this state directory is left. The state directory is removed unless a test failed or
// SANDRUN_KEEP_STATE=1. A suite's ctest entry may set SANDRUN_IT_CONFIG to a JSON object of
// config keys of its own (merged over the test config), and nginx serves test_pages_dir() at
// /_test/ for the browser test.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sandrun::integration {

class Stack {
 public:
  Stack();
  ~Stack();
  Stack(const Stack&) = delete;
  Stack& operator=(const Stack&) = delete;

  // Boost.Test global fixture hooks. setup() throws std::runtime_error with the logs' tails
  // if the stack does not become healthy.
  void setup();
  void teardown();

  // The running stack; only valid between setup() and teardown().
  static Stack& Get();

  int port() const { return port_; }
  const std::string& state_dir() const { return state_dir_; }
  // "http://127.0.0.1:PORT", the public_url links are built on.
  std::string base_url() const;
  std::string artifacts_dir() const { return state_dir_ + "/artifacts"; }
  // link_ttl_s in the test config.
  static constexpr int kLinkTtlS = 600;
  // The stack's own sandbox host uid (and uid + 1), so that processes and files of this
  // stack's runs can be told from those of another stack on the same machine.
  uid_t sandbox_uid() const { return sandbox_uid_; }
  // The stack's network_uid (its runs' sandrun-slirp), in 90000..99999: apart from every
  // stack's sandbox uids.
  uid_t network_uid() const { return static_cast<uid_t>(90000 + port_ % 10000); }
  // The stack's own cgroup directory name (config cgroup_name), for the same reason.
  std::string cgroup_name() const { return "sandrun-it-" + std::to_string(port_); }

  // Directory nginx serves at /_test/ (SANDRUN_TEST_PAGES_DIR): pages of the browser test.
  std::string test_pages_dir() const { return state_dir_ + "/test-pages"; }
  // An integer key of the daemon's config as scripts/serve generated it (with the suite's
  // SANDRUN_IT_CONFIG merged in); throws if absent. For keys the test config sets.
  int64_t ConfigInt(const std::string& key) const;

  // The secret from <state>/link_secret.conf (`set $sandrun_link_secret "<hex>";`).
  std::string LinkSecret() const;

  // The stack's sandrund (from /proc); -1 if none is running.
  pid_t DaemonPid() const;
  // After the daemon was stopped or killed by a test: waits for scripts/serve to exit (it
  // does when its daemon dies), then starts the stack again on the same state directory,
  // port and config, and waits for /healthz. Throws like setup().
  void Restart();

  // Last lines of scripts/serve's output, the daemon log and nginx's error log.
  std::string LogTails() const;

 private:
  void WriteTestConfig(const std::string& path) const;
  void StartServe();
  void WaitHealthy();
  // Pids of this stack's nginx master, its workers and sandrund (from /proc).
  std::vector<pid_t> StackPids() const;
  // Waits for scripts/serve to exit; false after timeout_s.
  bool WaitServeExit(int timeout_s);

  std::string state_dir_;
  int port_ = 0;
  uid_t sandbox_uid_ = 0;
  pid_t serve_pid_ = -1;
};

}  // namespace sandrun::integration
