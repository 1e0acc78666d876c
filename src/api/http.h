// The HTTP view the API handlers work on; the server fills it from FastCGI params.
#pragma once

#include <map>
#include <string>

namespace sandrun::api {

struct HttpRequest {
  std::string method;                          // "GET", "POST"
  std::string path;                            // decoded path, e.g. "/run"
  std::map<std::string, std::string> headers;  // lower-case names: "authorization"
  std::string body;
  std::string remote_addr;
  std::string request_id;
  // Header value or "" when absent.
  std::string Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::map<std::string, std::string> headers;
  std::string body;
};

// {"error":{"code","message","field"}} with `status`. `field` omitted when empty.
HttpResponse ErrorResponse(int status, const std::string& code, const std::string& message,
                           const std::string& field = "");

}  // namespace sandrun::api
