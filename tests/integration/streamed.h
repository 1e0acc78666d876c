// POST /run with Accept: application/x-ndjson (a streamed run, docs/API.md "Streamed output")
// to the stack's nginx, its events parsed as they arrive: for the streaming suite and for the
// hostile cases run streamed (integration.HostileCasesStreamed).
#pragma once

#include <rapidjson/document.h>

#include <functional>
#include <string>
#include <vector>

namespace sandrun::integration {

// One event as it arrived: its line and when (since the request was sent).
struct Event {
  std::string name;  // its "event" member
  std::string line;
  double at_s = 0;
  rapidjson::Document doc;
};

struct Streamed {
  int status = 0;  // 0: no HTTP answer
  std::string content_type, accel_buffering;
  std::string body;  // the whole body (a refusal's JSON)
  std::vector<Event> events;
};

// `stop_at`: stop reading (and close the connection) once an event satisfies it.
Streamed PostStreamed(const std::string& body, const std::function<bool(const Event&)>& stop_at);
Streamed PostStreamed(const std::string& body);

// The text of the stdout and stderr events of a stream, all steps, in order.
std::string StreamedOutput(const Streamed& s);

}  // namespace sandrun::integration
