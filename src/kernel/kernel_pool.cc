#include "kernel/kernel_pool.h"

#include <cstdio>
#include <vector>

#include "kernel/kernel_policy.h"
#include "sys/signal_free_thread.h"
#include "util/text.h"

namespace sandrun::kernel {

bool PoolServes(const KernelSpec& pooled, const KernelSpec& wanted) {
  // The terms a live kernel keeps for its life are the ones a session's kernel is replaced
  // over (kernel_policy.h); wall time, CPU time and output bound each cell, not the kernel.
  const KernelTerms pooled_terms{pooled.limits, pooled.network.enabled};
  const KernelTerms wanted_terms{wanted.limits, wanted.network.enabled};
  return !pooled.network.enabled && !wanted.network.enabled && pooled.env == wanted.env &&
         ReplaceReason(pooled_terms, wanted_terms).empty() && pooled.host_uid == wanted.host_uid &&
         pooled.host_gid == wanted.host_gid && pooled.python == wanted.python &&
         pooled.setup_files == wanted.setup_files;
}

KernelPool::KernelPool(Options options, Boot boot)
    : options_(std::move(options)), boot_(std::move(boot)) {
  stats_.size = options_.size;
}

KernelPool::~KernelPool() { Stop(); }

void KernelPool::Activate() {
  std::lock_guard lock(mu_);
  if (options_.size <= 0 || stopping_ || stats_.active) return;
  stats_.active = true;
  thread_ = sys::StartSignalFreeThread([this] { Refill(); });
}

std::unique_ptr<Kernel> KernelPool::Take(const KernelSpec& wanted) {
  std::unique_ptr<Kernel> taken;
  std::vector<std::unique_ptr<Kernel>> gone;  // ended outside the lock
  {
    std::lock_guard lock(mu_);
    if (options_.size <= 0 || stopping_) return nullptr;
    if (!PoolServes(options_.spec(), wanted)) return nullptr;  // not the pool's kind of run
    while (!ready_.empty() && taken == nullptr) {
      std::unique_ptr<Kernel> next = std::move(ready_.front());
      ready_.pop_front();
      if (!next->alive()) {
        ++stats_.failures;
        stats_.last_error = "a pooled kernel ended while waiting";
        gone.push_back(std::move(next));
      } else if (!PoolServes(next->spec(), wanted)) {
        gone.push_back(std::move(next));  // booted before a reload changed the defaults
      } else {
        taken = std::move(next);
      }
    }
    stats_.ready = static_cast<int64_t>(ready_.size());
    ++(taken ? stats_.hits : stats_.misses);
  }
  wake_.notify_all();
  return taken;
}

void KernelPool::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::deque<std::unique_ptr<Kernel>> gone;
  {
    std::lock_guard lock(mu_);
    gone.swap(ready_);
    stats_.ready = 0;
  }
  // Ended here, outside the lock: each kills its sandbox, removes its cgroup, unmounts.
}

KernelPoolStats KernelPool::Stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void KernelPool::DropStale(const KernelSpec& current, std::vector<std::unique_ptr<Kernel>>* gone) {
  for (auto it = ready_.begin(); it != ready_.end();) {
    const bool dead = !(*it)->alive();
    if (dead || !PoolServes((*it)->spec(), current)) {
      if (dead) {
        ++stats_.failures;
        stats_.last_error = "a pooled kernel ended while waiting";
      }
      gone->push_back(std::move(*it));
      it = ready_.erase(it);
    } else {
      ++it;
    }
  }
  stats_.ready = static_cast<int64_t>(ready_.size());
}

// One kernel at a time until `size` wait; every few seconds (and after each take) the dead
// and outdated ones are dropped; after a failed boot a second's pause (a host that cannot
// start kernels is not hammered).
void KernelPool::Refill() {
  using namespace std::chrono_literals;
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const KernelSpec spec = options_.spec();
    std::vector<std::unique_ptr<Kernel>> gone;
    DropStale(spec, &gone);
    if (!gone.empty()) {
      lock.unlock();
      gone.clear();
      lock.lock();
      continue;
    }
    if (static_cast<int64_t>(ready_.size()) >= options_.size) {
      wake_.wait_for(lock, 5s);
      continue;
    }
    if (options_.may_start) {
      const auto now = std::chrono::steady_clock::now();
      if (!due_since_) due_since_ = now;
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - *due_since_);
      if (!options_.may_start(waited)) {
        stats_.deferred = true;
        wake_.wait_for(lock, 20ms);
        continue;
      }
    }
    due_since_.reset();
    stats_.deferred = false;
    stats_.refilling = true;
    lock.unlock();
    auto made = boot_(spec, kPoolKernelPrefix + util::RandomHex(8));
    lock.lock();
    stats_.refilling = false;
    if (made.ok() && !stopping_) {
      ready_.push_back(std::move(*made));
      stats_.ready = static_cast<int64_t>(ready_.size());
    } else if (!made.ok()) {
      ++stats_.failures;
      stats_.last_error = made.error().message;
      std::fprintf(stderr, "sandrund: kernel pool: %s\n", made.error().message.c_str());
      wake_.wait_for(lock, 1s, [this] { return stopping_; });
    } else {
      lock.unlock();
      made->reset();
      lock.lock();
    }
  }
}

}  // namespace sandrun::kernel
