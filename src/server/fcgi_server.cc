#include "server/fcgi_server.h"

#include <fcgiapp.h>
#include <poll.h>
#include <rapidjson/document.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "api/errors.h"
#include "sys/syscalls.h"
#include "util/json_log.h"
#include "util/memory.h"
#include "util/phases.h"
#include "util/text.h"

namespace sandrun::server {
namespace {

std::mutex g_accept_mu;  // libfcgi: serialise FCGX_Accept_r on one socket (threaded.c example)

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 409:
      return "Conflict";
    case 413:
      return "Payload Too Large";
    case 415:
      return "Unsupported Media Type";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

std::string Param(FCGX_Request& req, const char* name) {
  const char* v = FCGX_GetParam(name, req.envp);
  return v ? v : "";
}

api::HttpRequest ReadRequest(FCGX_Request& req, int64_t max_body, bool* too_large) {
  api::HttpRequest request;
  request.method = Param(req, "REQUEST_METHOD");
  request.path = Param(req, "DOCUMENT_URI");
  if (request.path.empty()) request.path = Param(req, "SCRIPT_NAME");
  request.remote_addr = Param(req, "REMOTE_ADDR");
  for (char** p = req.envp; p && *p; ++p) {
    std::string kv = *p;
    if (kv.compare(0, 5, "HTTP_") != 0) continue;
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string name = kv.substr(5, eq - 5);
    for (char& c : name) c = c == '_' ? '-' : static_cast<char>(std::tolower(c));
    request.headers[name] = kv.substr(eq + 1);
  }
  // CGI passes the body's type as CONTENT_TYPE, not as an HTTP_* header (RFC 3875 §4.1.3).
  if (const std::string type = Param(req, "CONTENT_TYPE"); !type.empty()) {
    request.headers["content-type"] = type;
  }
  const std::string length_text = Param(req, "CONTENT_LENGTH");
  long long length = length_text.empty() ? 0 : std::atoll(length_text.c_str());
  *too_large = length > max_body;
  if (*too_large || length <= 0) return request;
  request.body.resize(static_cast<size_t>(length));
  int got = FCGX_GetStr(request.body.data(), static_cast<int>(length), req.in);
  request.body.resize(got > 0 ? static_cast<size_t>(got) : 0);
  return request;
}

// Reads the request's stream to its end: the empty FCGI_STDIN record nginx sends after the
// body, and a body left unread (one over max_body_bytes). A unix socket closed with input
// unread is reset, not closed (the peer reads ECONNRESET after the data), and nginx, reading
// on for the end of a short answer, fails the request ("readv() failed (104: Connection
// reset by peer) while reading upstream"; the client got a 200 with an empty body). Tests:
// Regressions/large_bodies_are_answered_whole_and_no_connection_is_reset, BodyLimit.
// Bounded by nginx's client_max_body_size, and by a receive timeout should a peer stop.
void DrainInput(FCGX_Request& req) {
  const timeval limit{2, 0};
  (void)::setsockopt(req.ipcFd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  char sink[16384];
  while (FCGX_GetStr(sink, sizeof sink, req.in) > 0) {
  }
}

void WriteResponse(FCGX_Request& req, const api::HttpResponse& response, const std::string& id) {
  std::string head = "Status: " + std::to_string(response.status) + " " + Reason(response.status) +
                     "\r\nContent-Type: " + response.content_type + "\r\nX-Request-Id: " + id +
                     "\r\nCache-Control: no-store\r\n";
  for (const auto& [k, v] : response.headers) head += k + ": " + v + "\r\n";
  head += "\r\n";
  FCGX_PutStr(head.data(), static_cast<int>(head.size()), req.out);
  FCGX_PutStr(response.body.data(), static_cast<int>(response.body.size()), req.out);
}

// A streamed response (a streamed /run): each write is flushed to nginx at once, which passes
// it on unbuffered (X-Accel-Buffering: no). The client is gone when a write fails or nginx
// has closed the connection (it does when its client goes away: fastcgi_ignore_client_abort
// is off), which poll(2) tells without reading.
class FcgiLineWriter : public run::LineWriter {
 public:
  static constexpr time_t kStalledS = 10;
  FcgiLineWriter(FCGX_Request& req, const std::string& id) : req_(req), id_(id) {}
  bool Begin() override {
    // A client that stops reading fills nginx's buffer and then this socket's: a write that
    // cannot go on for kStalledS counts as the client gone (the run ends), so a client that
    // never reads cannot hold a sandbox past its limits.
    const timeval stalled{kStalledS, 0};
    (void)::setsockopt(req_.ipcFd, SOL_SOCKET, SO_SNDTIMEO, &stalled, sizeof stalled);
    return Put("Status: 200 OK\r\nContent-Type: application/x-ndjson\r\nX-Request-Id: " + id_ +
               "\r\nCache-Control: no-store\r\nX-Accel-Buffering: no\r\n\r\n");
  }
  bool Write(const std::string& lines) override { return Put(lines); }
  bool Connected() override {
    if (failed_) return false;
    pollfd p{req_.ipcFd, POLLRDHUP, 0};
    if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0) {
      failed_ = true;
    }
    return !failed_;
  }

 private:
  bool Put(const std::string& text) {
    if (failed_ || FCGX_PutStr(text.data(), static_cast<int>(text.size()), req_.out) < 0 ||
        FCGX_FFlush(req_.out) < 0) {
      failed_ = true;
    }
    return !failed_;
  }
  FCGX_Request& req_;
  const std::string& id_;
  bool failed_ = false;
};

// nginx's $request_id (32 hex digits, fastcgi_param REQUEST_ID), so that nginx's access log,
// this log and the X-Request-Id header name a request alike; a fresh one of the same shape
// when it is absent or not that shape (a client cannot choose it: nginx sets the param).
std::string RequestId(FCGX_Request& req) {
  const std::string id = Param(req, "REQUEST_ID");
  const bool ok = id.size() == 32 && std::all_of(id.begin(), id.end(), [](char c) {
                    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                  });
  return ok ? id : util::RandomHex(16);
}

// The error code and message of an error body ({"error":{"code","message"}}); "" if none.
std::pair<std::string, std::string> ErrorOf(const std::string& body) {
  rapidjson::Document doc;
  if (body.size() > 65536 || doc.Parse(body.data(), body.size()).HasParseError() ||
      !doc.IsObject() || !doc.HasMember("error") || !doc["error"].IsObject()) {
    return {};
  }
  const auto& error = doc["error"];
  auto text = [&](const char* key) {
    return error.HasMember(key) && error[key].IsString() ? std::string(error[key].GetString())
                                                         : std::string();
  };
  return {text("code"), text("message")};
}

// One JSON line per request (util/json_log.h): who, what, how it ended, how long. Never the
// body: no code, no output. A 5xx adds the daemon's own error message (first 500 bytes).
void Log(const api::HttpRequest& request, const api::HttpResponse& response, int64_t ms) {
  const int status = response.status;
  util::LogLine line("request");
  line.Add("request_id", request.request_id)
      .Add("method", request.method)
      .Add("path", request.path)
      .Add("status", int64_t{status})
      .Add("ms", ms);
  const api::LogFields& log = response.log;
  if (!log.user.empty()) line.Add("user", log.user);
  if (!log.run_status.empty()) line.Add("run_status", log.run_status);
  if (log.queue_ms >= 0) line.Add("queue_ms", log.queue_ms);
  if (log.run_ms >= 0) line.Add("run_ms", log.run_ms);
  size_t phase_count = 0;
  const util::PhaseStamp* phases = util::Phases(&phase_count);
  if (phase_count > 0) line.Add("phases_us", phases, phase_count);
  if (status >= 400) {
    auto [code, message] = ErrorOf(response.body);
    if (!code.empty()) line.Add("error", code);
    if (status >= 500 && !message.empty()) line.Add("message", message.substr(0, 500));
  }
  line.Write();
}

}  // namespace

Status FcgiServer::Open() {
  if (FCGX_Init() != 0) return MakeError(ErrorKind::kSystem, "FCGX_Init failed");
  // sd_listen_fds(3): the sockets of sandrund.socket, if systemd started us through it
  // (unsets LISTEN_FDS, so sandboxes do not inherit the variables).
  const int passed = sd_listen_fds(1);
  if (passed > 1) {
    return MakeError(ErrorKind::kSystem, "systemd passed " + std::to_string(passed) +
                                             " sockets; sandrund.socket must listen on one");
  }
  if (passed == 1) {
    if (sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_STREAM, 1, options_.socket_path.c_str(), 0) <=
        0) {
      return MakeError(ErrorKind::kSystem,
                       "the socket systemd passed is not a listening unix stream socket "
                       "at " +
                           options_.socket_path +
                           ": the config's fcgi_socket and sandrund.socket's "
                           "ListenStream= must name the same path");
    }
    listen_fd_ = SD_LISTEN_FDS_START;
    inherited_ = true;
    return OkStatus();
  }
  ::unlink(options_.socket_path.c_str());
  listen_fd_ = FCGX_OpenSocket(options_.socket_path.c_str(), 128);
  if (listen_fd_ < 0) {
    return MakeError(ErrorKind::kSystem, "cannot listen on FastCGI socket " + options_.socket_path);
  }
  // nginx's workers run as another user; the socket's directory decides who may reach it.
  ::chmod(options_.socket_path.c_str(), 0666);
  return OkStatus();
}

void FcgiServer::Worker(const Handler& handler) {
  FCGX_Request req;
  FCGX_InitRequest(&req, listen_fd_, 0);
  while (!stopping_) {
    int rc;
    {
      std::lock_guard lock(g_accept_mu);
      if (stopping_) break;
      rc = FCGX_Accept_r(&req);
    }
    if (rc < 0) {
      if (stopping_) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    auto start = std::chrono::steady_clock::now();
    util::ResetPhases();
    bool too_large = false;
    api::HttpRequest request = ReadRequest(req, options_.max_body_bytes, &too_large);
    request.request_id = RequestId(req);
    FcgiLineWriter stream(req, request.request_id);
    request.stream = &stream;
    util::StampPhase("read");
    api::HttpResponse response =
        too_large ? api::ErrorResponse(api::ApiCode::kBodyTooLarge,
                                       "request body is larger than the configured maximum of " +
                                           std::to_string(options_.max_body_bytes) + " bytes")
                  : handler(request);
    util::StampPhase("handled");
    if (!response.streamed) WriteResponse(req, response, request.request_id);
    DrainInput(req);
    // Detached, FCGX_Finish_r closes the connection at once instead of shutting down its
    // write side and waiting (up to 2 s) for nginx to close first (libfcgi os_unix.c
    // OS_Close): the response is complete either way, and over a unix socket close(2) loses
    // nothing that was written (the input read to its end: DrainInput).
    (void)FCGX_Detach(&req);
    FCGX_Finish_r(&req);
    util::StampPhase("sent");
    Log(request, response,
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                              start)
            .count());
    // A large request or response leaves its pages in this thread's malloc arena: give them
    // back now that the response is sent (util/memory.h), not when the next one comes.
    // Resetting the response also releases its after_send (a run's teardown).
    const size_t moved = request.body.size() + response.body.size();
    request = {};
    response = {};
    util::AfterLargeRequest(moved);
  }
  FCGX_Free(&req, 1);
}

void FcgiServer::Serve(const Handler& handler) {
  std::vector<std::thread> threads;
  for (int i = 0; i < options_.threads; ++i) threads.emplace_back([&] { Worker(handler); });
  for (auto& t : threads) t.join();
}

void FcgiServer::Stop() {
  stopping_ = true;
  FCGX_ShutdownPending();
  // Wake the thread blocked in accept(2). The socket file goes too: a clean stop leaves no
  // sandrun.sock behind (nginx then fails to connect at once, with ENOENT). systemd's socket
  // stays as it is: it is shared with systemd, which queues connections on it and starts the
  // daemon again for them; the thread in accept(2) ends with the process.
  if (listen_fd_ >= 0 && !inherited_) {
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::unlink(options_.socket_path.c_str());
  }
}

}  // namespace sandrun::server
