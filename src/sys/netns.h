// Network namespaces and the helper process of a run's network (sandbox/network.h): the raw
// syscalls behind them, as thin wrappers that turn failures into Result errors naming the
// call. None of these is child-safe; SpawnAs's child side is (it runs between fork
// and execve).
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "sys/unique_fd.h"
#include "util/result.h"

namespace sandrun::sys {

// Opens /proc/<pid>/ns/<kind> ("net", "user") O_RDONLY|O_CLOEXEC. Errors: kSystem.
Result<UniqueFd> OpenNamespace(pid_t pid, const std::string& kind);
// The calling thread's own network namespace (/proc/thread-self/ns/net). Errors: kSystem.
Result<UniqueFd> OpenThreadNetNamespace();
// setns(fd, CLONE_NEWNET) for the CALLING THREAD only (a network namespace is per task);
// sockets it opens afterwards live in that namespace. Errors: kSystem.
Status EnterNetNamespace(int fd);

// A new network namespace with its loopback interface up and nothing else (no other
// interface; routes only to 127.0.0.0/8 and ::1), owned by the caller's user namespace; its
// loopback speaks IGMPv2 and MLDv1 (force_igmp_version, force_mld_version: no record of a
// left group waits there for a later report).
// The calling thread makes it (unshare(CLONE_NEWNET), which moves only the calling task;
// unshare(2)) and is back in `home` (its own namespace, OpenThreadNetNamespace) on return; it
// aborts if it cannot get back, as a thread left in another namespace would send every later
// socket of the daemon's there. Needs CAP_SYS_ADMIN and CAP_NET_ADMIN (root). Errors: kSystem.
// Not safe after fork.
Result<UniqueFd> MakeLoopbackNetNamespace(int home);

// Takes the loopback interface of the network namespace `netns` down and up again (the
// calling thread goes there and back, as ReadNetFilesIn): its routes are made anew (no cached
// route of the last user's left, nor its age), its multicast groups but the all-hosts ones
// are gone, with any report still waiting on a timer. Errors: kSystem naming the step.
Status RestartLoopbackIn(int netns, int home);

// The text of each of `names` (files of /proc/net: "sockstat", "snmp") as the network
// namespace `netns` shows them: the calling thread reads /proc/thread-self/net/<name> there and
// goes back to `home`, aborting if it cannot (as MakeLoopbackNetNamespace). A file that cannot
// be read gives "unreadable: <reason>" in its place (one a kernel does not have, say), the same
// text on every read. Errors: kSystem (the setns into `netns`). Not safe after fork.
Result<std::vector<std::string>> ReadNetFilesIn(int netns, int home,
                                                const std::vector<std::string>& names);

// A tap device made in the network namespace `netns` by the calling thread (which goes there
// and back, aborting if it cannot get back, as MakeLoopbackNetNamespace), configured: MTU,
// IPv4 address and netmask, up, default route via `gateway`; lo up. Returns its fd (IFF_TAP |
// IFF_NO_PI, close-on-exec): whoever holds it exchanges the namespace's frames on it, and
// needs no privilege or namespace of its own. The device goes with its namespace. Needs
// CAP_NET_ADMIN over the namespace (root). Errors: kSystem naming the step. Not safe after
// fork.
struct TapConfig {
  const char* name;
  int mtu;
  const char* address;
  const char* netmask;
  const char* gateway;
};
Result<UniqueFd> TapInNamespace(int netns, const TapConfig& config);

// The addresses of every interface of the calling thread's network namespace (getifaddrs),
// as text ("192.0.2.2", "fe80::1"; no zone). Errors: kSystem.
Result<std::vector<std::string>> InterfaceAddresses();

// Starts `argv` (argv[0] an absolute path, empty environment) as uid:gid with no
// supplementary groups. `fds[i]` (at most 12) becomes its fd 3 + i; stdin is /dev/null, stdout and
// stderr go to `log_fd`, every other fd is closed; RLIMIT_NOFILE is `max_fds` (soft and hard). It
// gets SIGKILL when the calling thread exits (PR_SET_PDEATHSIG, set after the credential change
// that would clear it). Errors: kSystem, naming the step that failed in the child (its errno is
// passed back before execve).
Result<pid_t> SpawnAs(const std::vector<std::string>& argv, uid_t uid, gid_t gid,
                      const std::vector<int>& fds, int log_fd, rlim_t max_fds);

// Waits up to `timeout_ms` for `pid` (a child) to exit, then SIGKILLs and reaps it. Returns
// its wait status.
int ReapWithin(pid_t pid, int timeout_ms);

}  // namespace sandrun::sys
