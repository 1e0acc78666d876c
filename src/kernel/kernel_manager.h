// The live kernels of stateful runs, one per user + session, at most
// max_kernels at once (the least recently used ended first), each ended after idle_s
// without a run (a thread of its own checks every second or so) and all when the manager
// is destroyed or EndAll() is called. A run leases its session's kernel: while leased a
// kernel is never ended by the policy. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "kernel/kernel.h"
#include "kernel/kernel_pool.h"
#include "sandbox/runner.h"
#include "util/result.h"

namespace sandrun::kernel {

struct ManagerOptions {
  std::string runs_dir;  // kernels' directories are made here as "k-<hex>"
  int64_t idle_s = 600;
  int64_t max_kernels = 4;
  // The kernel pool (kernel_pool.h): its size (0: none), the spec it boots kernels with and
  // when a boot may start. It fills from the first kernel start on.
  KernelPool::Options pool;
};

class KernelManager {
 public:
  struct Entry;

  // Exclusive use of one kernel while a run holds it; releasing marks the kernel used now,
  // and ends it if the run lost it.
  class Lease {
   public:
    Lease() = default;
    Lease(KernelManager* manager, std::shared_ptr<Entry> entry);
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    ~Lease();
    Kernel& kernel() const;
    // Why the kernel ended, for its session's next run (when this run lost it).
    void SetLostReason(std::string why);
    bool held() const { return entry_ != nullptr; }

   private:
    void Release();
    KernelManager* manager_ = nullptr;
    std::shared_ptr<Entry> entry_;
  };

  // What Acquire found.
  struct Acquired {
    Lease lease;
    std::string status;  // "kept", "started" (first kernel of this key) or "restarted"
    std::string note;    // why the previous kernel ended, with restarted (else "")
  };

  KernelManager(const sandbox::SandboxRunner* runner, ManagerOptions options);
  ~KernelManager();  // EndAll()
  KernelManager(const KernelManager&) = delete;
  KernelManager& operator=(const KernelManager&) = delete;

  // The live kernel of `key` if it was started with `spec`'s limits and network; else a
  // new one: the least recently used kernels are ended to make room, and StartKernel starts
  // it: a pooled kernel when the pool serves `spec`, else its directory and cgroup are made,
  // `populate` fills its workspace from a process in that cgroup (the session's files, then
  // charged to the kernel; the cgroup is null without cgroups; an error Status is returned
  // as is), then it boots in the same cgroup. A live kernel with
  // other limits or network is ended and replaced (note says why: ReplaceReason).
  // Errors: kUnavailable when max_kernels are all leased now; kSystem when it cannot start;
  // whatever `populate` returned. Waits for the kernel to boot (seconds).
  using Populate = kernel::Populate;
  Result<Acquired> Acquire(const std::string& key, const KernelSpec& spec,
                           const Populate& populate);

  // A kernel of one run only (a notebook run): started as Acquire starts one, but not
  // entered among the live kernels (no key, not counted against max_kernels: the run's
  // admission slot bounds it) and ended by its owner. Errors as Acquire's, but for
  // kUnavailable only when the daemon stops.
  Result<std::unique_ptr<Kernel>> StartForRun(const KernelSpec& spec, const Populate& populate);

  // Ends the kernel of `key` if one lives and is not leased (a stateless run changed its
  // session's files); its next run says restarted with `why`.
  void End(const std::string& key, const std::string& why);

  // Whether a kernel of `key` lives (booting, leased or idle). The kernel may end at any
  // moment after (idle expiry, room for another), so Acquire still decides.
  bool Has(const std::string& key) const;

  // Ends every kernel idle past idle_s (the reaper calls it). Returns how many.
  int EndIdle();
  // Ends every kernel, leased or not (the daemon stops). Idempotent.
  void EndAll();
  int64_t live() const;
  KernelPoolStats pool_stats() const { return pool_.Stats(); }

 private:
  void Reaper();
  void Remember(const std::string& key, const std::string& why);  // under mu_
  // Acquire's part under mu_: keeps the live kernel of `key` (out->lease held), or makes
  // room for `entry` and enters it in live_, moving the kernels to end into `gone`.
  Status ClaimUnderLock(const std::string& key, const KernelSpec& spec,
                        const std::shared_ptr<Entry>& entry, Acquired* out,
                        std::vector<std::unique_ptr<Kernel>>* gone);
  // Acquire's part outside the lock: a pooled kernel with its files (TakePooled), or a new
  // kernel's directory, cgroup, files and boot (BootKernel).
  Result<std::unique_ptr<Kernel>> StartKernel(const KernelSpec& spec, const Populate& populate);
  // A kernel of the pool serving `spec`, its workspace filled by `populate` and named as a
  // kernel started now is; null when the pool has none (or the one it had failed: logged).
  // Errors: what `populate` returned.
  Result<std::unique_ptr<Kernel>> TakePooled(const KernelSpec& spec, const Populate& populate);
  // A new kernel named `name` (directory and cgroup), filled by `populate` (may be null),
  // booted. Errors as StartKernel's.
  Result<std::unique_ptr<Kernel>> BootKernel(const KernelSpec& spec, const std::string& name,
                                             const Populate& populate);
  int64_t NowMs() const;

  const sandbox::SandboxRunner* runner_;
  ManagerOptions options_;
  void* zmq_context_ = nullptr;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::map<std::string, std::shared_ptr<Entry>> live_;
  std::map<std::string, std::string> ended_;  // key -> why its kernel ended (bounded)
  void StartReaperOnce();
  std::once_flag reaper_started_;
  std::thread reaper_;
  KernelPool pool_;  // last: stopped (and its kernels ended) first
};

}  // namespace sandrun::kernel
