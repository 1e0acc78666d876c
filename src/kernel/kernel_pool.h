// The kernel pool: kernels booted ahead of the runs that will use them, as the warm pool
// (run/warm_pool.h) does for program runs. A kernel costs 1-4 s to start (IPython's start in
// its sandbox); a pooled one is booted, connected and frozen in the background, off every
// request's path, and KernelManager::StartKernel takes it for a run whose KernelSpec is the
// pool's (PoolServes), fills its workspace then (Kernel::FillFrozen) and hands it out. A
// kernel is taken once and never comes back: the pool makes another.
//
// Bounds: at most `size` kernels wait (config kernel_pool_size), one boots at a time, and a
// due boot waits while `may_start` says the machine is busy. They count against no user's
// kernels (max_kernels) and no run's sandbox slot. On the host a waiting kernel's directory
// and cgroup are named "pool-k-<hex>"; the taker renames them "k-<hex>". Nothing of the pool
// outlives Stop(); after a kill of the daemon, its next start sweeps them as any kernel's
// (cgroup sweep, runs directory sweep). Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "kernel/kernel.h"
#include "util/result.h"

namespace sandrun::kernel {

// Whether a kernel booted with `pooled` can serve a run that asks for `wanted`: everything a
// kernel keeps from its start is the same — environment, every limit, uid and gid, the
// interpreter, and the set-up files (the run's stdin among them: a run with stdin is never
// served) — and neither has the network (a pooled kernel never has it). Pure.
bool PoolServes(const KernelSpec& pooled, const KernelSpec& wanted);

// The pool's own name prefix on the host (directories and cgroups).
inline constexpr char kPoolKernelPrefix[] = "pool-k-";

struct KernelPoolStats {
  int64_t size = 0;        // configured
  int64_t ready = 0;       // waiting now
  bool active = false;     // filling (from the first kernel start on)
  bool refilling = false;  // one boots now
  bool deferred = false;   // a boot is due but waits for the machine (may_start)
  int64_t hits = 0;        // kernels handed out
  int64_t misses = 0;      // starts the pool would have served but found none ready
  int64_t failures = 0;    // boots that failed, kernels that ended while waiting
  std::string last_error;
};

class KernelPool {
 public:
  // Boots one kernel with `spec`, named `name` (pool-k-<hex>) on the host.
  using Boot = std::function<Result<std::unique_ptr<Kernel>>(const KernelSpec& spec,
                                                             const std::string& name)>;
  struct Options {
    int64_t size = 0;  // kernels kept ready; 0: no pool
    // The spec pooled kernels are booted with now (the default limits may change on a
    // config reload: kernels of an older spec are ended).
    std::function<KernelSpec()> spec;
    // Whether a boot due since `waited` may start now; null: at once.
    std::function<bool(std::chrono::milliseconds waited)> may_start;
  };

  KernelPool(Options options, Boot boot);
  ~KernelPool();  // Stop()
  KernelPool(const KernelPool&) = delete;
  KernelPool& operator=(const KernelPool&) = delete;

  // Starts filling (the refill thread, once; a signal-free thread). A daemon that never
  // starts a kernel never holds an idle one. No-op with size 0 or after Stop().
  void Activate();
  // A ready kernel that serves `wanted` (PoolServes), alive, or null. Wakes the refill.
  std::unique_ptr<Kernel> Take(const KernelSpec& wanted);
  // Ends the refill thread (waiting for a boot under way) and every waiting kernel.
  // Idempotent.
  void Stop();
  KernelPoolStats Stats() const;

 private:
  void Refill();
  // Under mu_: moves the waiting kernels that ended or whose spec is no longer the pool's
  // into `gone`.
  void DropStale(const KernelSpec& current, std::vector<std::unique_ptr<Kernel>>* gone);

  Options options_;
  Boot boot_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Kernel>> ready_;
  KernelPoolStats stats_;
  bool stopping_ = false;
  std::optional<std::chrono::steady_clock::time_point> due_since_;
  std::thread thread_;
};

}  // namespace sandrun::kernel
