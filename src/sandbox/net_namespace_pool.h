// Network namespaces made ahead for runs without network. Making one costs
// ~1 ms (setup_net: the loopback device, per-namespace sysctl and protocol tables), the largest
// part of a sandbox's clone; a background thread makes them off the request path, and the
// launcher's thread joins one (setns) just for its clone, so the child starts in it instead of
// in a namespace of its own (CLONE_NEWNET).
//
// Each namespace has only its loopback interface, up (127.0.0.1 and ::1 reach the run's own
// sockets and nothing else), and is owned by the daemon's user namespace, not the run's: the
// sandbox's root has no capability in it, so it cannot add interfaces, routes or firewall
// rules or change its sysctls. One namespace serves one run: the pool holds the only other
// reference, which it hands over, and the namespace goes when the run's last process does.
// Its kernel memory (a few hundred KiB) is charged to the daemon's cgroup, not the run's.
// Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "sys/unique_fd.h"

namespace sandrun::sandbox {

// What the pool says of itself since start (/healthz, /metrics): runs that found a namespace
// ready, runs that made their own, namespaces that could not be made and the last reason.
struct NetNamespaceStats {
  long hits = 0, misses = 0, failures = 0;
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
  // none is ready (a miss: the caller makes its own with CLONE_NEWNET). Never blocks on the
  // making of one. Not safe after fork.
  sys::UniqueFd Take();

  // The daemon's own network namespace (opened at construction), to go back to after a
  // setns into a taken one; -1 if it could not be opened (then Take never hands one out).
  int home() const { return home_.get(); }

  NetNamespaceStats stats() const;

 private:
  void Refill();

  const size_t size_;
  sys::UniqueFd home_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<sys::UniqueFd> ready_;
  NetNamespaceStats stats_;
  bool started_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sandrun::sandbox
