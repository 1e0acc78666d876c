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

}  // namespace sandrun::kernel
