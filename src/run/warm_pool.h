// The warm pool: per language, a configured number of sandboxes started
// ahead of their runs — run directory and tmpfs, cgroup, namespaces, mounts, rlimits, seccomp
// filter, and the interpreter itself loaded and waiting for its program
// (sandbox::WaitingSandbox; Python: src/python/sandrun_warm.py; bash: kBashWarmScript). A
// stateless run of the pool's shape takes one (Take) and the pool makes another in the
// background, off the request path. One sandbox serves one run and is then destroyed, so no
// run can observe another through it.
//
// Which runs it serves, and how a run is adapted to a pooled sandbox, is the run handler's
// (engine.h WarmShapeFits): one program step, no session, prepared environment or
// network, and the pool's disk_mb; memory and processes are written to the cgroup, CPU time and
// file size lowered by the start line. Everything else runs cold, as without a pool.
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "run/run_dir.h"
#include "sandbox/launcher.h"
#include "util/result.h"

namespace sandrun::run {

// One ready sandbox with the run directory and cgroup it will run in.
struct WarmSandbox {
  std::string id;                         // the run id it serves: names its cgroup and directory
  std::string language;                   // config language name
  int64_t disk_mb = 0;                    // size of its tmpfs (/tmp, workspace) and /dev/shm
  std::shared_ptr<RunTeardown> teardown;  // its RunDir and cgroup; outlives `sandbox`
  std::unique_ptr<sandbox::WaitingSandbox> sandbox;
  ~WarmSandbox() { sandbox.reset(); }  // reaped before its tmpfs and cgroup go
};

// What /healthz and /metrics say of one language's pool.
struct WarmPoolStats {
  int64_t size = 0;   // configured
  int64_t ready = 0;  // waiting now
  bool refilling = false;
  bool deferred = false;  // a refill is due but waits for the runs in flight (RefillGate)
  int64_t hits = 0;       // runs served warm
  int64_t misses = 0;     // runs that fit but found none ready (ran cold)
  int64_t failures = 0;   // sandboxes that could not be started or ended while waiting
  std::string last_error;
};

// When a due refill may start, from the runs in flight. Starting an
// interpreter costs as much CPU as a cold run's. A refill that overlaps the run that took
// the sandbox slows that run (measured on a 2-CPU VM: a pooled `bash true` 14-18 ms with the
// refill beside it, 10.8 ms without); while every CPU runs a sandbox it only slows the runs in
// flight, and the runs that find the pool empty start cold at the same cost. So a refill
// starts at once when no run is in flight; after `patience` while fewer runs than `cpus` use
// a CPU (a long run does not keep the pool empty, nor do runs that sleep or wait for input
// or the network); never while `cpus` or more do.
struct RefillLoad {
  int64_t in_flight = 0;  // runs admitted and not ended
  int64_t on_cpu = 0;     // tasks using a CPU now; at most in_flight of them are runs
};
struct RefillGate {
  std::function<RefillLoad()> load;  // null: refills start as soon as one is due
  int64_t cpus = 1;                  // CPUs the daemon may use
  std::chrono::milliseconds patience{100};
};

// How often a deferred refill asks the gate again.
constexpr std::chrono::milliseconds kDeferredPoll{20};

// Whether a refill due for `waited` may start under `load` (RefillGate). Pure.
bool RefillMayStart(const RefillGate& gate, RefillLoad load, std::chrono::milliseconds waited);

class WarmPool {
 public:
  // Makes one ready sandbox of `language` (Engine::MakeWarmSandbox).
  using Factory = std::function<Result<std::unique_ptr<WarmSandbox>>(const std::string& language)>;

  // `sizes`: language -> sandboxes kept ready (0 or absent: none). A due refill waits
  // (asking again every kDeferredPoll, shown as `deferred`) until `gate` lets it start.
  // gate.load is called by the refill thread with the pool's lock held: it must not call
  // into the pool.
  WarmPool(std::map<std::string, int64_t> sizes, Factory factory, RefillGate gate = {});
  ~WarmPool();  // Stop()
  WarmPool(const WarmPool&) = delete;
  WarmPool& operator=(const WarmPool&) = delete;

  // Starts the refill thread (call once, after the daemon's signal mask is set: the thread
  // inherits it).
  void Start();
  // Ends the refill thread and destroys every waiting sandbox. Idempotent.
  void Stop();
  // A ready sandbox of `language` with a tmpfs of `disk_mb`, or null (counted as a miss) when
  // none is ready. Wakes the refill thread.
  std::unique_ptr<WarmSandbox> Take(const std::string& language, int64_t disk_mb);
  // Whether `language` has a pool at all.
  bool Serves(const std::string& language) const;
  std::map<std::string, WarmPoolStats> Stats() const;

 private:
  struct Language {
    WarmPoolStats stats;
    std::deque<std::unique_ptr<WarmSandbox>> ready;
  };
  void Refill();
  // The language that most lacks a ready sandbox, or "" when none does. Under mu_.
  std::string Neediest() const;

  Factory factory_;
  RefillGate gate_;
  // When the refill thread first found a refill due that has not started yet (RefillGate).
  std::optional<std::chrono::steady_clock::time_point> due_since_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::map<std::string, Language> languages_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sandrun::run
