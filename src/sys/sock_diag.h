// Ending TCP connections from outside the process that owns them: sock_diag(7) netlink dumps
// and SOCK_DESTROY (CONFIG_INET_DIAG_DESTROY), which aborts a socket as if it had received a
// reset (tcp_abort: a RST goes to the peer, the socket and its buffers are freed), orphans
// included. Not child-safe.
#pragma once

#include <linux/inet_diag.h>
#include <sys/types.h>

#include <functional>
#include <set>

#include "util/result.h"

namespace sandrun::sys {

// What DestroyTcpSockets did: sockets found, destroyed, and refused (EOPNOTSUPP when the
// kernel lacks CONFIG_INET_DIAG_DESTROY; a socket gone in between is neither).
struct DestroyCount {
  int found = 0;
  int destroyed = 0;
  int refused = 0;
  int last_errno = 0;  // of the last refusal
};

// Destroys the IPv4 and IPv6 TCP sockets of the network namespace `netns_fd` (-1: the calling
// thread's own), every one of them when `inodes` is null, else only those whose inode is in
// `inodes` (a process's sockets, from /proc/PID/fd). The calling thread enters the namespace
// just to open the netlink socket and is back before return (it aborts if it cannot get back).
// Needs CAP_NET_ADMIN over the namespace. At most 1 << 20 sockets per family. Errors: kSystem
// (netlink socket, dump).
Result<DestroyCount> DestroyTcpSockets(int netns_fd, const std::set<ino_t>* inodes);

// As DestroyTcpSockets, for the sockets `keep` takes (called with each socket's dump entry:
// its id, state, uid, inode — 0 for an orphan no process holds).
using SocketFilter = std::function<bool(const inet_diag_msg&)>;
Result<DestroyCount> DestroyTcpSocketsIf(int netns_fd, const SocketFilter& keep);

// The inodes of the sockets open in process `pid` (readlink of /proc/PID/fd/*: "socket:[N]").
// Errors: kSystem (the directory cannot be listed).
Result<std::set<ino_t>> SocketInodesOf(pid_t pid);

}  // namespace sandrun::sys
