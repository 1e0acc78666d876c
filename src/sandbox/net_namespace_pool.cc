#include "sandbox/net_namespace_pool.h"

#include <chrono>

#include "sys/netns.h"
#include "sys/signal_free_thread.h"

namespace sandrun::sandbox {
namespace {

// After a failure (no CAP_SYS_ADMIN, a namespace limit reached: user.max_net_namespaces), the
// thread waits this long before it tries again; runs meanwhile make their own.
constexpr auto kRetryAfterFailure = std::chrono::seconds(5);

}  // namespace

NetNamespacePool::NetNamespacePool(size_t size) : size_(size) {
  if (size_ == 0) return;
  auto home = sys::OpenThreadNetNamespace();
  if (home.ok()) {
    home_ = std::move(*home);
  } else {
    stats_.last_error = home.error().message;
  }
}

NetNamespacePool::~NetNamespacePool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

sys::UniqueFd NetNamespacePool::Take() {
  if (size_ == 0 || !home_.valid()) return {};
  std::lock_guard<std::mutex> lock(mu_);
  if (!started_) {
    started_ = true;
    // The first Take may come from the start-up self-test, before the daemon blocks its stop
    // signals: the thread must not take them.
    thread_ = sys::StartSignalFreeThread([this] { Refill(); });
  }
  wake_.notify_one();
  if (ready_.empty()) {
    ++stats_.misses;
    return {};
  }
  sys::UniqueFd fd = std::move(ready_.front());
  ready_.pop_front();
  ++stats_.hits;
  return fd;
}

NetNamespaceStats NetNamespacePool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void NetNamespacePool::Refill() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (ready_.size() >= size_) {
      wake_.wait(lock);
      continue;
    }
    lock.unlock();
    auto made = sys::MakeLoopbackNetNamespace(home_.get());
    lock.lock();
    if (made.ok()) {
      ready_.push_back(std::move(*made));
      continue;
    }
    ++stats_.failures;
    stats_.last_error = made.error().message;
    wake_.wait_for(lock, kRetryAfterFailure, [this] { return stopping_; });
  }
}

}  // namespace sandrun::sandbox
