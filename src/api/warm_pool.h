// The warm pool (issue 11 part 2): per language, a configured number of sandboxes started
// ahead of their runs — run directory and tmpfs, cgroup, namespaces, mounts, rlimits, seccomp
// filter, and the interpreter itself loaded and waiting for its program
// (sandbox::WaitingSandbox; Python: src/python/sandrun_warm.py; bash: kBashWarmScript). A
// stateless run of the pool's shape takes one (Take) and the pool makes another in the
// background, off the request path. One sandbox serves one run and is then destroyed, so no
// run can observe another through it.
//
// Which runs it serves, and how a run is adapted to a pooled sandbox, is the run handler's
// (run_handler.cc WarmShapeFits): one program step, no session, prepared environment or
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
#include <string>
#include <thread>

#include "api/run_dir.h"
#include "sandbox/launcher.h"
#include "util/result.h"

namespace sandrun::api {

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
  bool deferred = false;  // a refill is due but waits for a CPU that no run is using
  int64_t hits = 0;       // runs served warm
  int64_t misses = 0;     // runs that fit but found none ready (ran cold)
  int64_t failures = 0;   // sandboxes that could not be started or ended while waiting
  std::string last_error;
};

// How often a deferred refill asks again whether a CPU is free.
constexpr std::chrono::milliseconds kDeferredPoll{20};

class WarmPool {
 public:
  // Makes one ready sandbox of `language` (Service::MakeWarmSandbox).
  using Factory = std::function<Result<std::unique_ptr<WarmSandbox>>(const std::string& language)>;
  // Whether a refill may start now (Service: fewer runs in flight than the daemon has CPUs).
  // Called by the refill thread with the pool's lock held: must not call into the pool.
  using IdleCheck = std::function<bool()>;

  // `sizes`: language -> sandboxes kept ready (0 or absent: none). `idle` null: refills
  // start as soon as a sandbox is taken. Otherwise a due refill waits (polling every
  // kDeferredPoll) until `idle` says so: starting an interpreter costs as much CPU as a cold
  // run's, so while every CPU runs a sandbox a refill only slows the runs in flight, and the
  // runs that find the pool empty start cold at the same cost (issue 11 part 4).
  WarmPool(std::map<std::string, int64_t> sizes, Factory factory, IdleCheck idle = nullptr);
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
  IdleCheck idle_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::map<std::string, Language> languages_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sandrun::api
