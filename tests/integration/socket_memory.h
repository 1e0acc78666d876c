// What a run's sockets hold in the kernel, for the socket-memory cases of the Containment and
// Network suites: the probe's "sockfill" line (tests/probe) and the host's /proc/net/sockstat.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "host_state.h"

namespace sandrun::integration {

// "mem" of `proto` ("TCP:", "UDP:") in the host's /proc/net/sockstat, in pages (host-wide:
// the counter behind net.ipv4.tcp_mem / udp_mem); -1 if absent.
inline int64_t SockstatPages(const std::string& proto) {
  std::ifstream in("/proc/net/sockstat");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(proto, 0) != 0) continue;
    const size_t at = line.find(" mem ");
    return at == std::string::npos ? -1 : std::stoll(line.substr(at + 5));
  }
  return -1;
}

inline int64_t SocketPages() { return SockstatPages("TCP:") + SockstatPages("UDP:"); }

// The probe's "sockfill" line, parsed; found is false when the run printed none.
struct SockFill {
  bool found = false;
  long long sockets = 0, written = 0, kernel = 0;
  long tcp_before = 0, tcp_peak = 0, udp_before = 0, udp_peak = 0;
  std::string first_error;  // the first errno name a socket call got, "none" without one
  // The host's TCP + UDP counters' growth from the probe's start to its peak, in bytes.
  long long HostBytes() const {
    return ((tcp_peak - tcp_before) + (udp_peak - udp_before)) * 4096LL;
  }
};

// The bound on a run's socket buffers: `memory_mb`. What the kernel charges past the socket
// buffers' limit (a socket with empty queues always gets some room) is within it by the
// socket cap (DESIGN.md "Socket memory"). The host's counters are host-wide: other stacks'
// traffic and the per-CPU reserves of the counter (net.core.mem_pcpu_rsv, 1 MiB a CPU here)
// move them too, so the bound is checked on the run cgroup's own counter (SocketPeakSampler)
// and the sockets' own buffers; the host's growth is printed.
inline long long SocketPeakBound(long long memory_mb) { return memory_mb << 20; }

inline SockFill ParseSockFill(const std::string& out) {
  SockFill f;
  const size_t at = out.find("sockfill ");
  if (at == std::string::npos) return f;
  const size_t space = out.find(' ', at + 9);
  char error[32] = {};
  f.found = std::sscanf(out.c_str() + space,
                        " sockets=%lld written=%lld kernel=%lld tcp_pages=%ld->%ld "
                        "udp_pages=%ld->%ld first_error=%31s",
                        &f.sockets, &f.written, &f.kernel, &f.tcp_before, &f.tcp_peak,
                        &f.udp_before, &f.udp_peak, error) == 8;
  f.first_error = error;
  return f;
}

// Waits until the host's TCP + UDP memory is at most `baseline` + `slack` pages, for at most
// `seconds`; returns what is left above `baseline` then (pages).
inline int64_t SocketPagesLeftAfter(int64_t baseline, int64_t slack, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int64_t left = SocketPages() - baseline;
  while (left > slack && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    left = SocketPages() - baseline;
  }
  return left;
}

// The peak of the stack's run cgroups' socket-memory counters while it lives, sampled every
// 10 ms from a thread: on v1 memory.kmem.tcp.max_usage_in_bytes (TCP and UDP buffers, the
// kernel's forced charges included: the exact counter the run's bound is about), on v2
// memory.peak (socket memory is charged there). Exact per run, where the host's sockstat
// also moves with every other stack on the host.
class SocketPeakSampler {
 public:
  SocketPeakSampler()
      : thread_([this] {
          while (!stop_) {
            for (const std::string& dir : RunCgroupDirs()) {
              for (const char* file : {"/memory.kmem.tcp.max_usage_in_bytes", "/memory.peak"}) {
                std::ifstream in(dir + file);
                long long v = -1;
                if (in >> v) peak_ = std::max(peak_.load(), v);
              }
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
        }) {}
  ~SocketPeakSampler() { Stop(); }
  // Stops sampling; the peak in bytes, -1 when no run cgroup had the counter.
  long long Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return peak_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<long long> peak_{-1};
  std::thread thread_;
};

}  // namespace sandrun::integration
