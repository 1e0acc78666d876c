// StackMapping: owns an anonymous private mapping made for a thread or clone(2) child to run
// on (MAP_STACK; only the pages touched are faulted in), and unmaps it when reset or
// destroyed. The launcher's CLONE_VM child runs on one: memory of its own, not heap, so the
// pages the child touches (charged to the run's memory cgroup, where it runs) go with the
// run instead of staying in the daemon's malloc arenas, charged to a cgroup already removed.
// Not thread-safe; Map allocates nothing else (mmap(2) only).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <utility>

#include "sys/syscalls.h"
#include "util/result.h"

namespace sandrun::sys {

class StackMapping {
 public:
  StackMapping() = default;
  StackMapping(StackMapping&& other) noexcept
      : base_(std::exchange(other.base_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  StackMapping& operator=(StackMapping&& other) noexcept {
    if (this != &other) {
      Reset();
      base_ = std::exchange(other.base_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  StackMapping(const StackMapping&) = delete;
  StackMapping& operator=(const StackMapping&) = delete;
  ~StackMapping() { Reset(); }

  // Maps `bytes` (unmapping what it held). Errors: kSystem, naming the call.
  Status Map(size_t bytes) {
    Reset();
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (p == MAP_FAILED) return ErrnoError("mmap of a stack");
    base_ = static_cast<char*>(p);
    bytes_ = bytes;
    return OkStatus();
  }
  // The highest address: where a downward-growing stack starts (clone(2) `stack`).
  char* top() const { return base_ + bytes_; }
  void Reset() {
    if (base_ != nullptr) ::munmap(base_, bytes_);
    base_ = nullptr;
    bytes_ = 0;
  }

 private:
  char* base_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace sandrun::sys
