// The outcome of one sandboxed run: the program's fate is data (RunOutcome), a failure to
// build the sandbox is an Error (docs/STYLE.md: isolate's RE/SG/TO/XX kept apart).
#pragma once

#include <cstdint>
#include <string>

namespace sandrun::sandbox {

enum class RunOutcome {
  kExited,       // exited by itself (exit_code set; 0 or not)
  kSignaled,     // killed by a signal that is not ours (signal set)
  kWallTimeout,  // we stopped it: wall-clock limit
  kCpuTimeout,   // CPU-time limit (SIGXCPU / cgroup usage)
  kMemoryLimit,  // the kernel's OOM killer acted in the run's cgroup
  kOutputLimit,  // stdout+stderr passed output_bytes; we stopped it
};

const char* OutcomeName(RunOutcome outcome);

// For test and log output.
template <typename Stream>
Stream& operator<<(Stream& out, RunOutcome outcome) {
  out << OutcomeName(outcome);
  return out;
}

struct SandboxResult {
  RunOutcome outcome = RunOutcome::kExited;
  int exit_code = -1;       // -1 when not exited
  int signal = 0;           // 0 when not signaled
  std::string stdout_text;  // raw bytes, head + marker + tail when truncated
  std::string stderr_text;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  int64_t wall_ms = 0;
  int64_t cpu_ms = 0;
  int64_t max_rss_kb = 0;
  int64_t process_limit_hits = 0;  // forks the kernel refused at the process limit
  // With the network (spec.network.enabled): bytes of IP packets received and sent through
  // the run's tap0; -1 without it.
  int64_t net_rx_bytes = -1;
  int64_t net_tx_bytes = -1;
};

}  // namespace sandrun::sandbox
