// The per-sandbox cap on live inet sockets (bpf/socket_cap.bpf.c; DESIGN.md "Socket
// memory"): BPF programs on a cgroup2 directory (the daemon's sandbox subtree) count each
// sandbox cgroup's live sockets and refuse socket(2) past its cap with EPERM. With the cap,
// the kernel's forced socket-buffer charges (past any memory cgroup limit) are bounded per
// socket, so a run's socket memory is bounded by construction (SocketShare).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "util/result.h"

namespace sandrun::sandbox {

// What a run's memory_bytes buys in sockets: at most `cap` live inet sockets, and a TCP
// (socket buffer) limit of `tcp_limit_bytes`, such that the limit plus the forced charges of
// every socket the cap lets live (an accepted TCP socket counts too) stay within
// memory_bytes. kForcedBytesPerSocket is measured (DESIGN.md).
struct SocketShare {
  static constexpr int64_t kMaxSockets = 64;
  static constexpr int64_t kForcedBytesPerSocket = 96 * 1024;
  int64_t cap = 0;
  uint64_t tcp_limit_bytes = 0;
  static SocketShare For(uint64_t memory_bytes);
};

class SocketCap {
 public:
  // Loads the programs and attaches them to the cgroup2 directory `dir` (effective for its
  // descendants). Errors (kSystem) say which step failed. The attachment ends with this
  // object (a BPF link per program, closed with the daemon).
  static Result<std::shared_ptr<SocketCap>> Attach(const std::string& dir);
  ~SocketCap();
  SocketCap(const SocketCap&) = delete;
  SocketCap& operator=(const SocketCap&) = delete;

  // A sandbox under the cap: its slot (its count and cap) and the cgroup id mapped to it.
  struct Place {
    uint64_t slot = 0;
    uint64_t cgroup_id = 0;
  };
  // Registers the cgroup2 directory `dir` (below the attached one) as a new sandbox with room
  // for `cap` live sockets. A socket(2) in a cgroup below the attached one that was never
  // registered is refused.
  Result<Place> Register(const std::string& dir, int64_t cap);
  // Maps the cgroup2 directory `dir` to `slot` too (a sandbox's cgroup made anew under another
  // name: cgroup2 has no rename); returns its cgroup id.
  Result<uint64_t> Alias(const std::string& dir, uint64_t slot);
  void Unalias(uint64_t cgroup_id);
  Status SetCap(uint64_t slot, int64_t cap);
  // Removes the slot and the cgroup id mapped to it.
  void Forget(const Place& place);
  // How many sockets the slot holds now (tests, diagnostics); -1 when unknown.
  int64_t Live(uint64_t slot) const;

 private:
  struct State;
  explicit SocketCap(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace sandrun::sandbox
