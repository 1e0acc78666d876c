#include "kernel/kernel_policy.h"

#include <algorithm>

namespace sandrun::kernel {

std::vector<std::string> IdleKernels(const std::vector<KernelSlot>& slots, int64_t now_ms,
                                     int64_t idle_ms) {
  std::vector<std::string> out;
  for (const auto& slot : slots) {
    if (!slot.in_use && now_ms - slot.last_used_ms >= idle_ms) out.push_back(slot.key);
  }
  return out;
}

Room MakeRoom(const std::vector<KernelSlot>& slots, int64_t max_kernels) {
  Room room;
  const int64_t live = static_cast<int64_t>(slots.size());
  const int64_t to_end = live + 1 - std::max<int64_t>(max_kernels, 0);
  if (to_end <= 0) {
    room.enough = true;
    return room;
  }
  std::vector<const KernelSlot*> idle;
  for (const auto& slot : slots) {
    if (!slot.in_use) idle.push_back(&slot);
  }
  if (static_cast<int64_t>(idle.size()) < to_end || max_kernels <= 0) return room;
  std::stable_sort(idle.begin(), idle.end(), [](const KernelSlot* a, const KernelSlot* b) {
    return a->last_used_ms < b->last_used_ms;
  });
  for (int64_t i = 0; i < to_end; ++i) room.evict.push_back(idle[static_cast<size_t>(i)]->key);
  room.enough = true;
  return room;
}

std::string ReplaceReason(const KernelTerms& live, const KernelTerms& wanted) {
  const sandbox::SandboxLimits& a = live.limits;
  const sandbox::SandboxLimits& b = wanted.limits;
  if (a.memory_bytes != b.memory_bytes || a.processes != b.processes ||
      a.file_size_bytes != b.file_size_bytes || a.disk_bytes != b.disk_bytes ||
      a.open_files != b.open_files) {
    return "this run asks for other limits (memory_mb, processes, file_size_mb, disk_mb) than "
           "the kernel was started with";
  }
  if (live.network != wanted.network) {
    // A sandbox's network namespace is set up before its program starts (network.h): the
    // network cannot be given to, or taken from, a running kernel.
    return std::string("the kernel was restarted because this run asks for the network ") +
           (wanted.network ? "on" : "off") + " and the kernel ran with it " +
           (live.network ? "on" : "off");
  }
  return "";
}

}  // namespace sandrun::kernel
