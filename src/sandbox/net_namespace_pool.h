// Network namespaces made ahead for runs without network. Making one costs
// ~1 ms (setup_net: the loopback device, per-namespace sysctl and protocol tables), the largest
// part of a sandbox's clone, and taking it down about as much again (cleanup_net, in a kernel
// worker); a background thread makes them off the request path, and the launcher's thread
// joins one (setns) just for its clone, so the child starts in it instead of in a namespace of
// its own (CLONE_NEWNET).
//
// Each namespace has only its loopback interface, up (127.0.0.1 and ::1 reach the run's own
// sockets and nothing else), and is owned by the daemon's user namespace, not the run's: the
// sandbox's root has no capability in it, so it cannot add interfaces, routes or firewall
// rules or change its sysctls. Its kernel memory (a few hundred KiB) is charged to the daemon's
// cgroup, not the run's. Thread-safe.
//
// Kept for the same owner: after a run, the launcher gives its namespace back (Return) with
// the run's owner (its user) and a pidfd of the run's init. The thread
// restarts its loopback (cached routes and pending multicast reports go) and keeps it for that
// owner's next run only when the run's every process is gone and the namespace is as a fresh
// one (Clean): no socket of any kind left (TIME_WAIT, orphaned, in flight), and every counter,
// multicast membership, flow label and IPv6 route statistic as in a namespace never used (its
// loopback speaks IGMPv2 and MLDv1, which keep no record of a left group for a later report).
// Anything else, and it goes. So a run finds either a namespace nobody used or the one its own
// owner's earlier run left as new, but for times (when its loopback restarted); never another
// owner's (docs/DESIGN.md, "Network namespaces kept for their user").
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sys/unique_fd.h"

namespace sandrun::sandbox {

// What the pool says of itself since start (/healthz, /metrics): runs that found a namespace
// ready, runs that made their own, namespaces that could not be made and the last reason.
// Of those given back: kept for their owner (recycled), handed out again (reused), and let go
// because the run left something in them or did not end in time (discarded); and now: how
// many are kept (each an fd of the daemon's) and how many wait for or are in their check.
struct NetNamespaceStats {
  long hits = 0, misses = 0, failures = 0;
  long recycled = 0, reused = 0, discarded = 0;
  long kept = 0, checking = 0;
  std::string last_error;
};

class NetNamespacePool {
 public:
  // Keeps `size` namespaces ready (0: none; Take always returns an invalid fd). The thread
  // starts at the first Take, with every signal blocked.
  explicit NetNamespacePool(size_t size);
  ~NetNamespacePool();  // stops the thread; the namespaces not taken go
  NetNamespacePool(const NetNamespacePool&) = delete;
  NetNamespacePool& operator=(const NetNamespacePool&) = delete;

  // A ready namespace (an O_CLOEXEC fd of /proc/thread-self/ns/net), or an invalid fd when
  // none is ready (a miss: the caller makes its own with CLONE_NEWNET). One kept for `owner`
  // (non-empty) first, else a fresh one. Never blocks on the making of one. Not safe after
  // fork.
  sys::UniqueFd Take(const std::string& owner = "");

  // Gives back a namespace Take handed out, used by a run of `owner`; `run_end` is a pidfd of
  // the run's init (readable once every process of the run is gone). The thread checks it
  // and keeps it for `owner`'s next Take, or lets it go. Never blocks. An empty `owner` or an
  // invalid fd: let go at once.
  void Return(sys::UniqueFd netns, const std::string& owner, sys::UniqueFd run_end);

  // The daemon's own network namespace (opened at construction), to go back to after a
  // setns into a taken one; -1 if it could not be opened (then Take never hands one out).
  int home() const { return home_.get(); }

  NetNamespaceStats stats() const;

 private:
  // A namespace given back, waiting for the thread's check.
  struct Returned {
    std::string owner;
    sys::UniqueFd netns, run_end;
  };
  struct Kept {
    std::string owner;
    sys::UniqueFd netns;
  };

  void Refill();
  // The thread's check of one given back: its run ended and it is as a fresh one.
  bool Clean(const Returned& r);
  bool NoSocketsIn(int netns) const;

  const size_t size_;
  sys::UniqueFd home_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<sys::UniqueFd> ready_;
  std::deque<Returned> returned_;  // at most 2 x size_; more are let go
  long checking_ = 0;              // returned_ and the one in its check
  std::deque<Kept> kept_;          // at most size_, the oldest let go first
  // The compared files of the first namespace the thread made, as made (the thread's own).
  std::vector<std::string> fresh_;
  NetNamespaceStats stats_;
  bool started_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sandrun::sandbox
