// StartSignalFreeThread: a std::thread that takes no signal. The daemon waits for its stop
// signals (SIGTERM, SIGINT, SIGHUP) in one thread with sigwait (api/stop_signals.h); a thread
// that does not block them may take them instead (a process-directed signal goes to any thread
// that does not block it, signal(7)), and the stop is then never seen. A new thread inherits
// its creator's mask (pthread_sigmask(3)), so this one is created with every signal blocked,
// whichever thread starts it and whenever: a background thread started lazily, by the start-up
// self-test say, before the daemon blocks its stop signals. Not safe after fork.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <thread>
#include <utility>

namespace sandrun::sys {

template <typename Body>
std::thread StartSignalFreeThread(Body&& body) {
  struct MaskGuard {
    sigset_t before;
    MaskGuard() {
      sigset_t all;
      ::sigfillset(&all);
      ::pthread_sigmask(SIG_SETMASK, &all, &before);
    }
    ~MaskGuard() { ::pthread_sigmask(SIG_SETMASK, &before, nullptr); }
  } guard;
  return std::thread(std::forward<Body>(body));
}

}  // namespace sandrun::sys
