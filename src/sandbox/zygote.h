// The daemon's side of the zygote (config `zygote`): a Python started once as a run's Python
// starts (site, sitecustomize, the loader), which builds a run's sandbox with the launcher's
// own code and goes on in it as the run's Python (zygote_module.cc, sandrun_zygote.py). The
// launcher sends it a ZygoteRequest and the child's fds and gets back the sandbox's first
// process (pid and pidfd), which it then sets up and supervises as its own clone's.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sandbox/init_plan.h"
#include "sys/unique_fd.h"
#include "util/result.h"

namespace sandrun::sandbox {

struct ZygoteOptions {
  std::string python;            // the sandbox's python3 (an absolute host path, the same file)
  std::string script_dir;        // host directory holding the support files and sandrun_zygote.py
  std::string module_dir;        // host directory holding _sandrun_zygote.so
  std::vector<std::string> env;  // a run's environment (its PYTHONPATH names script_dir)
  std::vector<std::string> preload;  // modules it imports before it serves (config)
  bool kernel = false;  // the kernel zygote: imports ipykernel (sandrun_zygote.py --kernel)
  // Processes that serve requests side by side: the zygote and forks of it made once it has
  // started (they share its memory). One serves one request at a time, and while it does it
  // waits for the daemon's half of the sandbox set-up: with one, runs queue for it under load.
  int servers = 1;
};

// What /healthz shows of a zygote: its serving processes, the sandboxes it started, and the
// requests it failed (each such run started cold instead).
struct ZygoteStats {
  int64_t servers = 0;
  int64_t served = 0;
  int64_t failed = 0;
};

struct ZygoteChild {
  pid_t pid = -1;
  sys::UniqueFd pidfd;
};

class Zygote {
 public:
  // Starts the zygote (posix_spawn, so from the thread that lives as long as the daemon: its
  // parent-death signal follows that thread) and waits for it to be ready, but for the kernel
  // zygote, whose first Spawn waits. Errors: kSystem.
  static Result<std::unique_ptr<Zygote>> Start(const ZygoteOptions& options);
  // Closes the socket (the zygote exits at its EOF) and kills and reaps it.
  ~Zygote();
  Zygote(const Zygote&) = delete;
  Zygote& operator=(const Zygote&) = delete;

  // One sandbox: `fds` in zygote_module.cc's order. Thread-safe: each of its servers takes
  // one request at a time (single-threaded; it answers once the clone is made), a request
  // waits for a free one. Errors: kSystem when the zygote (that server) is gone or refused.
  Result<ZygoteChild> Spawn(const ZygoteRequest& request, const std::vector<int>& fds);
  pid_t pid() const { return pid_; }
  ZygoteStats stats() const {
    return {static_cast<int64_t>(servers_.size()), served_.load(), failed_.load()};
  }

 private:
  // One process serving requests on its end of `sock`.
  struct Server {
    sys::UniqueFd sock;
    bool ready = false, failed = false;
    bool busy = false;  // under mu_: a request holds it
  };
  Zygote(std::vector<Server> servers, pid_t pid) : servers_(std::move(servers)), pid_(pid) {}
  // Waits (once) for `server`'s ready word; by the request that holds it (or at Start).
  // Errors: kSystem, for good.
  Status AwaitReady(Server& server);
  Server& Acquire();  // a server no request holds (waits for one)
  void Release(Server& server);
  // The request and its answer on `server`, which the caller holds.
  Result<ZygoteChild> Exchange(Server& server, const std::string& bytes,
                               const std::vector<int>& fds);
  std::mutex mu_;
  std::condition_variable freed_;
  int ready_timeout_ms_ = 0;
  std::string what_;  // its command line's start, for the error
  std::vector<Server> servers_;
  pid_t pid_;
  std::atomic<int64_t> served_{0}, failed_{0};
};

}  // namespace sandrun::sandbox
