// Admission: at most `slots` sandboxes at once, at most `queue` requests waiting, each for
// at most `wait`. Past that the caller answers 503 with Retry-After (DESIGN.md §2).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace sandrun::run {

class Admission {
 public:
  Admission(int64_t slots, int64_t queue, std::chrono::milliseconds wait)
      : slots_(slots), queue_(queue), wait_(wait) {}

  // RAII slot; released on destruction.
  class Ticket {
   public:
    explicit Ticket(Admission* owner) : owner_(owner) {}
    Ticket(Ticket&& other) noexcept : owner_(other.owner_) { other.owner_ = nullptr; }
    Ticket(const Ticket&) = delete;
    ~Ticket() {
      if (owner_) owner_->Release();
    }
    bool admitted() const { return owner_ != nullptr; }

   private:
    Admission* owner_;
  };

  // Takes a slot, waiting in the queue if there is room; not admitted when the queue is full
  // or the wait expired. Thread-safe.
  Ticket Acquire();

  int64_t active() const;
  int64_t queued() const;
  int64_t slots() const { return slots_; }
  int64_t queue_limit() const { return queue_; }

 private:
  void Release();
  const int64_t slots_;
  const int64_t queue_;
  const std::chrono::milliseconds wait_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t active_ = 0;
  int64_t waiting_ = 0;
};

// Bounds the requests that wait for a busy session, each holding a worker thread meanwhile:
// at most `per_key` for one session and `total` for all (24 waiters held
// all 22 workers). Past that the caller answers 409 at once. Thread-safe.
class WaiterGate {
 public:
  WaiterGate(int64_t per_key, int64_t total) : per_key_(per_key), total_(total) {}

  // RAII place among the waiters; given back on destruction.
  class Pass {
   public:
    Pass(WaiterGate* owner, std::string key) : owner_(owner), key_(std::move(key)) {}
    Pass(Pass&& other) noexcept : owner_(other.owner_), key_(std::move(other.key_)) {
      other.owner_ = nullptr;
    }
    Pass(const Pass&) = delete;
    ~Pass() {
      if (owner_) owner_->Leave(key_);
    }
    bool admitted() const { return owner_ != nullptr; }

   private:
    WaiterGate* owner_;
    std::string key_;
  };

  // A place to wait for `key` (the session), or none (not admitted) when `key` or all keys
  // have their full count of waiters.
  Pass Enter(const std::string& key);
  int64_t waiting() const;

 private:
  void Leave(const std::string& key);
  const int64_t per_key_;
  const int64_t total_;
  mutable std::mutex mu_;
  std::map<std::string, int64_t> by_key_;  // keys with at least one waiter
  int64_t waiting_ = 0;
};

}  // namespace sandrun::run
