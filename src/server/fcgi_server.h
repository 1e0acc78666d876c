// FastCGI front of the daemon: libfcgi worker threads accepting on one socket, each
// turning a FastCGI request into an api::HttpRequest and writing the HttpResponse back.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "api/http.h"
#include "util/result.h"

namespace sandrun::server {

struct ServerOptions {
  // Unix socket. Socket activation (sandrund.socket): when systemd passes one socket
  // (sd_listen_fds), it must be a listening stream socket at this path and is used as it is;
  // otherwise the server makes its own here, replacing a file that exists, mode 0666.
  std::string socket_path;
  int threads = 8;  // worker threads (config::WorkerThreads: slots, queue, waiters, 4 spare)
  int64_t max_body_bytes = 16 << 20;  // larger bodies get 413 without being read whole
};

using Handler = std::function<api::HttpResponse(const api::HttpRequest&)>;

// Open(), then Serve() until another thread calls Stop(). Not safe after fork.
class FcgiServer {
 public:
  explicit FcgiServer(ServerOptions options) : options_(std::move(options)) {}
  // Errors: systemd passed more than one socket, or one that is not a listening unix stream
  // socket at socket_path; the server's own socket cannot be made.
  Status Open();
  // Whether Open() took the socket from systemd (socket activation).
  bool socket_from_systemd() const { return inherited_; }
  // Runs options.threads worker threads, each taking one request at a time (the accept is
  // serialised), and blocks until all of them ended: only after Stop(), each once its
  // request in flight is answered. With systemd's socket the worker in accept(2) may never
  // end, so the caller bounds that wait (api/stop_signals.h).
  void Serve(const Handler& handler);
  // Thread-safe, and returns at once: workers end after their request in flight; the one in
  // accept(2) is woken by shutting the socket down, and the socket file is removed (not
  // systemd's socket, which stays as it is, and its accepting thread ends with the process).
  void Stop();

 private:
  void Worker(const Handler& handler);
  ServerOptions options_;
  int listen_fd_ = -1;
  bool inherited_ = false;  // systemd's socket: never shut down or unlinked here
  std::atomic<bool> stopping_{false};
};

}  // namespace sandrun::server
