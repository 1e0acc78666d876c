// The HTTP view the API handlers work on; the server fills it from FastCGI params.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "run/event_sink.h"

namespace sandrun::api {

struct HttpRequest {
  std::string method;                          // "GET", "POST"
  std::string path;                            // decoded path, e.g. "/run"
  std::map<std::string, std::string> headers;  // lower-case names: "authorization"
  std::string body;
  std::string remote_addr;
  std::string request_id;
  // The response as a stream of lines (the server's; null where a handler cannot stream):
  // a streamed /run writes through it and answers HttpResponse::streamed.
  run::LineWriter* stream = nullptr;
  // Header value or "" when absent.
  std::string Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// What the request log line says about a response beyond its status and timing (never code,
// output or secrets).
struct LogFields {
  std::string user;        // the user a run acts as; "" when the request got no that far
  std::string run_status;  // a finished run's status ("ok", "timeout", ...); "" if none ran
  int64_t queue_ms = -1;   // time waiting for a sandbox slot (ms); -1: did not get there
  int64_t run_ms = -1;     // the run's wall time (ms); -1: none ran
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::map<std::string, std::string> headers;
  std::string body;
  LogFields log;  // for the server's log line; not sent
  // Sent already through HttpRequest::stream: the server writes nothing more. `status` and
  // `body` are then what the log line reports (the body an error event's, if any).
  bool streamed = false;
  // Held until the response has been sent, then released by the server: what a handler
  // must still clean up but the client need not wait for (a run's tmpfs and cgroup, issue
  // 11: ~6-10 ms of unmount and rmdir). Its destructor runs on the worker thread.
  std::shared_ptr<void> after_send;
};

// {"error":{"code","message","field"}} with `status`. `field` omitted when empty.
HttpResponse ErrorResponse(int status, const std::string& code, const std::string& message,
                           const std::string& field = "");

}  // namespace sandrun::api
