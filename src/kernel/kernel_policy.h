// Which live kernels to end: the idle ones, the least recently used when a new one needs
// room under max_kernels, and one started on other terms (limits, network) than a run asks
// for. Pure (times are given), so the policy is tested without clocks or kernels;
// kernel_manager.cc applies it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sandbox/spec.h"

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

// What a kernel is started with and keeps for its whole life: the limits that bound the
// sandbox (memory_bytes, processes, file_size_bytes, disk_bytes, open_files; wall and CPU
// time are per run) and whether it has the network.
struct KernelTerms {
  sandbox::SandboxLimits limits;
  bool network = false;
};

// Why a live kernel started on `live` terms cannot serve a run that asks for `wanted`, as
// a clause for the run's stderr ("this run asks for the network on ..."); "" when it can.
// A change of limits is named before one of the network, each changed limit by its request
// field with both values ("memory_mb 512 -> 1024"; the others are not named). Pure.
std::string ReplaceReason(const KernelTerms& live, const KernelTerms& wanted);

}  // namespace sandrun::kernel
