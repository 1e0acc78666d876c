#include "streamed.h"

#include <httplib.h>

#include <chrono>

namespace sandrun::integration {

Streamed PostStreamedTo(int port, const std::vector<std::pair<std::string, std::string>>& headers,
                        const std::string& body, const std::function<bool(const Event&)>& stop_at) {
  using Clock = std::chrono::steady_clock;
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(120, 0);
  Streamed out;
  std::string pending;
  const auto start = Clock::now();
  httplib::Request req;
  req.method = "POST";
  req.path = "/run";
  req.headers = {{"Accept", "application/x-ndjson"}};
  for (const auto& [name, value] : headers) req.headers.emplace(name, value);
  req.body = body;
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    out.body.append(data, n);
    pending.append(data, n);
    for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
      Event e;
      e.line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      e.at_s = std::chrono::duration<double>(Clock::now() - start).count();
      e.doc.Parse(e.line.c_str());
      if (e.doc.IsObject() && e.doc.HasMember("event") && e.doc["event"].IsString()) {
        e.name = e.doc["event"].GetString();
      }
      out.events.push_back(std::move(e));
      if (stop_at(out.events.back())) return false;
    }
    return true;
  };
  auto result = client.send(req);
  if (result) {
    out.status = result->status;
    out.content_type = result->get_header_value("Content-Type");
    out.accel_buffering = result->get_header_value("X-Accel-Buffering");
  }
  return out;
}

std::string StreamedOutput(const Streamed& s) {
  std::string text;
  for (const auto& e : s.events) {
    if (e.name != "stdout" && e.name != "stderr") continue;
    const auto it = e.doc.FindMember("text");
    if (it != e.doc.MemberEnd() && it->value.IsString()) {
      text.append(it->value.GetString(), it->value.GetStringLength());  // NULs kept
    }
  }
  return text;
}

}  // namespace sandrun::integration
