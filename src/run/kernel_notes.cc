#include "run/kernel_notes.h"

namespace sandrun::run {

std::string CellStoppedBy(const kernel::ExecuteResult& r, const config::Limits& limits) {
  using kernel::ExecuteStatus;
  switch (r.status) {
    case ExecuteStatus::kWallTimeout:
      return "wall-clock time limit of " + std::to_string(limits.wall_time_s) + " s reached";
    case ExecuteStatus::kCpuTimeout:
      return "CPU time limit of " + std::to_string(limits.cpu_time_s) + " s reached";
    case ExecuteStatus::kMemoryLimit:
      return "memory limit of " + std::to_string(limits.memory_mb) + " MiB reached";
    case ExecuteStatus::kOutputLimit:
      return r.output_lost
                 ? "output lost: the kernel sent one message over 16 MiB (a print or value "
                   "that large, or output faster than that between its flushes)"
                 : "output limit exceeded (" + std::to_string(limits.output_bytes) + " bytes)";
    case ExecuteStatus::kKilled:
      return "the kernel died";
    case ExecuteStatus::kOk:
    case ExecuteStatus::kError:
      return "";
  }
  return "";
}

}  // namespace sandrun::run
