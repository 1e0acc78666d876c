// Which live kernels to end: the idle ones, and the least recently used when a new one
// needs room under max_kernels. Pure (times are given), so the policy is tested without
// clocks or kernels; kernel_manager.cc applies it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sandrun::kernel {

struct KernelSlot {
  std::string key;           // user + session
  int64_t last_used_ms = 0;  // when its last run ended (any monotonic clock)
  bool in_use = false;       // a run holds it now: never ended by the policy
};

// Keys of the kernels not in use whose last run ended at least `idle_ms` before `now_ms`.
std::vector<std::string> IdleKernels(const std::vector<KernelSlot>& slots, int64_t now_ms,
                                     int64_t idle_ms);

struct Room {
  std::vector<std::string> evict;  // least recently used first
  bool enough = false;             // after ending `evict`, one more kernel fits
};

// What to end so that one more kernel fits with at most `max_kernels` live: the least
// recently used kernels not in use. `enough` is false when even ending all of those
// leaves no room (then `evict` is empty: nothing should be ended for nothing).
Room MakeRoom(const std::vector<KernelSlot>& slots, int64_t max_kernels);

}  // namespace sandrun::kernel
