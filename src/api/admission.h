// Admission: at most `slots` sandboxes at once, at most `queue` requests waiting, each for
// at most `wait`. Past that the caller answers 503 with Retry-After (DESIGN.md §2).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace sandrun::api {

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

}  // namespace sandrun::api
