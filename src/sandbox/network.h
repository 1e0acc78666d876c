// The network of one run that asked for it: user-mode TCP/IP (libslirp, in
// sandrun-slirp), and the refusal rules of network_rules.h installed in the run's network
// namespace.
//
// Order (Launcher::Start): clone the sandbox's first process into its new namespaces (it
// waits on the sync pipe before doing anything), write its id maps, then RunNetwork::Start:
// the daemon (host root) makes tap0 in the run's network namespace and configures it
// (10.0.2.100/24, MTU 65520, up, default route via 10.0.2.2; lo is up), starts
// sandrun-slirp with the tap's fd and waits for its ready byte; then it installs the ruleset
// there; only then is the sync byte written, so the program starts with the network and its
// rules in place.
//
// sandrun-slirp runs as `network_uid` (NetworkSpec::uid): a host uid that owns no sandbox and
// no namespace — it never enters the run's namespaces, the tap fd is its only way into the
// run's network — without supplementary groups, in the host's namespaces, in the run's memory
// cgroup (its memory and its host sockets' buffers are the run's), with at most 512 fds and a
// seccomp filter of its own (slirp_main.cc), with libslirp's disable_host_loopback (10.0.2.2
// does not reach the host's 127.0.0.1) and no IPv6, DHCP or emulation. It dies with the run
// (its exit pipe is closed when the RunNetwork is destroyed) and with the daemon (the same
// pipe closes; PR_SET_PDEATHSIG too). Before it goes, every TCP connection of the run is
// destroyed (sock_diag SOCK_DESTROY): its host sockets and all TCP sockets left in the run's
// namespace, so none outlives the run as an orphan holding buffers.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "sandbox/cgroup.h"
#include "sandbox/network_rules.h"
#include "sandbox/spec.h"
#include "sys/unique_fd.h"
#include "util/result.h"

namespace sandrun::sandbox {

class RunNetwork {
 public:
  // Starts the network of the sandbox whose first process is `pid` (still waiting on its
  // sync pipe): tap0 in its network namespace, sandrun-slirp as spec.uid:spec.gid, ready
  // within 5 s, then the firewall of `spec` (network_allow_cidrs) and of the host's interface
  // addresses read now. Errors: code "sandbox", naming the step (sandrun-slirp's own output
  // included when it failed). sandrun-slirp goes into `cgroup`'s memory cgroup (null: none).
  // Not safe after fork.
  static Result<std::unique_ptr<RunNetwork>> Start(pid_t pid, const NetworkSpec& spec,
                                                   RunCgroup* cgroup);
  RunNetwork(const RunNetwork&) = delete;
  RunNetwork& operator=(const RunNetwork&) = delete;
  // Destroys the run's TCP connections (EndConnections), stops sandrun-slirp (closes its exit
  // fd; SIGKILL after 2 s) and reaps it.
  ~RunNetwork();

  // Bytes of IP packets received on / sent through tap0 so far (the firewall's counters);
  // -1 each when they cannot be read. Valid after the run's processes are gone (the
  // namespace is kept open by this object). Not safe after fork.
  CounterBytes Usage() const;

 private:
  // Destroys (SOCK_DESTROY: a reset to the peer, buffers freed) sandrun-slirp's TCP sockets in
  // the host's namespace, then every TCP socket left in the run's. Best effort: a kernel
  // without CONFIG_INET_DIAG_DESTROY leaves them to time out. Call once the run's processes
  // are gone. Not safe after fork.
  void EndConnections();

  RunNetwork() = default;
  pid_t slirp_pid_ = -1;
  sys::UniqueFd exit_write_;  // closing it tells sandrun-slirp to exit
  sys::UniqueFd netns_;       // the run's network namespace
  sys::UniqueFd closed_;      // sandrun-slirp's records of sockets closed open (slirp_closed.h)
};

// Runs `commands` (nft -f syntax) through libnftables in the network namespace `netns_fd`,
// from the calling thread (which goes there and back; the daemon's other threads stay where
// they are). Calls are serialised (libnftables keeps some global state). Returns nft's
// output. Errors: kSystem with nft's error text. Not safe after fork.
Result<std::string> RunNftIn(int netns_fd, const std::string& commands);

}  // namespace sandrun::sandbox
