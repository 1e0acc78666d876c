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
  std::string socket_path;  // unix socket; replaced if it exists; mode 0666
  int threads = 8;  // worker threads (config::WorkerThreads: slots, queue, waiters, 4 spare)
  int64_t max_body_bytes = 16 << 20;  // larger bodies get 413 without being read whole
};

using Handler = std::function<api::HttpResponse(const api::HttpRequest&)>;

// Serves until `stop` becomes true (checked between requests; Stop() wakes the threads).
// Errors: cannot create the socket. Not safe after fork.
class FcgiServer {
 public:
  explicit FcgiServer(ServerOptions options) : options_(std::move(options)) {}
  Status Open();
  // Blocks in worker threads until Stop(); then waits up to `grace_ms` for requests in
  // flight and returns.
  void Serve(const Handler& handler);
  void Stop();

 private:
  void Worker(const Handler& handler);
  ServerOptions options_;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
};

}  // namespace sandrun::server
