#include "server/fcgi_server.h"

#include <fcgiapp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <thread>
#include <vector>

#include "sys/syscalls.h"
#include "util/text.h"

namespace sandrun::server {
namespace {

std::mutex g_accept_mu;  // libfcgi: serialise FCGX_Accept_r on one socket (threaded.c example)
std::mutex g_log_mu;

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

void WriteResponse(FCGX_Request& req, const api::HttpResponse& response, const std::string& id) {
  std::string head = "Status: " + std::to_string(response.status) + " " + Reason(response.status) +
                     "\r\nContent-Type: " + response.content_type + "\r\nX-Request-Id: " + id +
                     "\r\nCache-Control: no-store\r\n";
  for (const auto& [k, v] : response.headers) head += k + ": " + v + "\r\n";
  head += "\r\n";
  FCGX_PutStr(head.data(), static_cast<int>(head.size()), req.out);
  FCGX_PutStr(response.body.data(), static_cast<int>(response.body.size()), req.out);
}

void Log(const api::HttpRequest& request, const api::HttpResponse& response, int64_t ms) {
  const int status = response.status;
  std::time_t now = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::lock_guard lock(g_log_mu);
  std::fprintf(stderr, "%s id=%s %s %s -> %d (%lld ms)%s%s\n", when, request.request_id.c_str(),
               request.method.c_str(), util::SanitizeUtf8(request.path).c_str(), status,
               static_cast<long long>(ms), status >= 500 ? ": " : "",
               status >= 500 ? response.body.c_str() : "");
}

}  // namespace

Status FcgiServer::Open() {
  if (FCGX_Init() != 0) return MakeError("server", "FCGX_Init failed");
  ::unlink(options_.socket_path.c_str());
  listen_fd_ = FCGX_OpenSocket(options_.socket_path.c_str(), 128);
  if (listen_fd_ < 0) {
    return MakeError("server", "cannot listen on FastCGI socket " + options_.socket_path);
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
    bool too_large = false;
    api::HttpRequest request = ReadRequest(req, options_.max_body_bytes, &too_large);
    request.request_id = util::RandomHex(8);
    api::HttpResponse response =
        too_large ? api::ErrorResponse(413, "body_too_large",
                                       "request body is larger than the configured maximum of " +
                                           std::to_string(options_.max_body_bytes) + " bytes")
                  : handler(request);
    WriteResponse(req, response, request.request_id);
    FCGX_Finish_r(&req);
    Log(request, response,
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                              start)
            .count());
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
  // sandrun.sock behind (nginx then fails to connect at once, with ENOENT).
  if (listen_fd_ >= 0) {
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::unlink(options_.socket_path.c_str());
  }
}

}  // namespace sandrun::server
