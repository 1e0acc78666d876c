// What sandrun-slirp tells the daemon of the TCP host sockets it closed while a connection
// was still open (network.h): one record per socket, appended to its fd 6 (a memfd of the
// daemon's), addresses and ports in network byte order as sock_diag(7) names a socket. Such
// a socket becomes an orphan that no process holds, which the daemon destroys when the run
// ends. At most kMaxClosedRecords per run (later ones are not recorded).
#pragma once

#include <cstdint>

namespace sandrun::sandbox {

struct ClosedTcp {
  uint32_t family;  // AF_INET or AF_INET6
  uint16_t sport, dport;
  uint32_t src[4], dst[4];
};

inline constexpr int kMaxClosedRecords = 8192;

}  // namespace sandrun::sandbox
