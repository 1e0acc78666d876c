// Jupyter's server API over HTTP and WebSocket (Boost.Beast), on a unix socket that nginx
// proxies /api/ and /login to (docs/DESIGN.md, "Additions: a Jupyter server API"): the REST
// endpoints of kernels and kernelspecs, and each kernel's channels WebSocket, whose
// execute_requests run in sandrun's kernels (jupyter/kernels.h). One thread runs every socket
// (an io_context); boots, deletes and executes, which block, run on a small pool of threads.
#pragma once

#include <memory>
#include <string>

#include "api/service.h"
#include "util/result.h"

namespace sandrun::jupyter {

class JupyterServer {
 public:
  // `service` outlives the server. `socket_path`: where to listen (replaced if it exists).
  JupyterServer(api::Service* service, std::string socket_path);
  ~JupyterServer();  // Stop()
  JupyterServer(const JupyterServer&) = delete;
  JupyterServer& operator=(const JupyterServer&) = delete;

  // Makes the socket (mode 0666, as the FastCGI one). Errors: kSystem naming the call.
  Status Open();
  // Starts the threads; the signal mask of the caller is theirs.
  void Start();
  // Stops taking connections, interrupts every running execute, waits for the work in
  // flight and ends the threads. Idempotent. The kernels themselves end with the service's
  // (Service::EndKernels), after this.
  void Stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace sandrun::jupyter
