// POST /run with Accept: application/x-ndjson (a streamed run, docs/API.md "Streamed output")
// to the stack's nginx, its events parsed as they arrive: for the streaming suite and for the
// hostile cases run streamed (integration.HostileCasesStreamed).
#pragma once

#include <rapidjson/document.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "stack.h"

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

// To the nginx on 127.0.0.1:`port`, with `headers` added. `stop_at`: stop reading (and close
// the connection) once an event satisfies it. Needs no test stack (integration.Cluster's front).
Streamed PostStreamedTo(int port, const std::vector<std::pair<std::string, std::string>>& headers,
                        const std::string& body, const std::function<bool(const Event&)>& stop_at);

// To the test stack's nginx (Stack).
inline Streamed PostStreamed(const std::string& body,
                             const std::function<bool(const Event&)>& stop_at) {
  return PostStreamedTo(Stack::Get().port(), {}, body, stop_at);
}
inline Streamed PostStreamed(const std::string& body) {
  return PostStreamed(body, [](const Event&) { return false; });
}

// The text of the stdout and stderr events of a stream, all steps, in order.
std::string StreamedOutput(const Streamed& s);

}  // namespace sandrun::integration
