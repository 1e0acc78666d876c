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

namespace {

// "name a -> b" of one limit, with byte limits in MiB as the request gives them.
void NameChange(const char* name, uint64_t live, uint64_t wanted, uint64_t unit, std::string* out) {
  if (live == wanted) return;
  if (!out->empty()) *out += ", ";
  *out += std::string(name) + " " + std::to_string(live / unit) + " -> " +
          std::to_string(wanted / unit);
}

}  // namespace

std::string ReplaceReason(const KernelTerms& live, const KernelTerms& wanted) {
  const sandbox::SandboxLimits& a = live.limits;
  const sandbox::SandboxLimits& b = wanted.limits;
  constexpr uint64_t kMiB = 1ull << 20;
  std::string changed;
  NameChange("memory_mb", a.cgroup.memory_bytes, b.cgroup.memory_bytes, kMiB, &changed);
  NameChange("processes", static_cast<uint64_t>(a.cgroup.processes),
             static_cast<uint64_t>(b.cgroup.processes), 1, &changed);
  NameChange("file_size_mb", a.file_size_bytes, b.file_size_bytes, kMiB, &changed);
  NameChange("disk_mb", a.disk_bytes, b.disk_bytes, kMiB, &changed);
  NameChange("open_files", static_cast<uint64_t>(a.open_files), static_cast<uint64_t>(b.open_files),
             1, &changed);
  if (!changed.empty()) {
    return "this run asks for other limits than the kernel was started with (" + changed + ")";
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
