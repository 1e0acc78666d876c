// The daemon's log: one JSON object a line on stderr (journald keeps each line as one
// message; `journalctl -u sandrund -o cat | jq` reads them). Every line has "time" (UTC,
// RFC 3339 with milliseconds) and "event"; what else depends on the event. Values are
// sanitized to UTF-8. Never put code, program output or secrets into a line. Not safe after
// fork (allocates, takes a lock).
#pragma once

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdint>
#include <string>
#include <vector>

#include "util/phases.h"

namespace sandrun::util {

class LogLine {
 public:
  explicit LogLine(const char* event);
  LogLine& Add(const char* key, const std::string& value);
  LogLine& Add(const char* key, const char* value) { return Add(key, std::string(value)); }
  LogLine& Add(const char* key, int64_t value);
  LogLine& Add(const char* key, const std::vector<std::string>& values);
  // {"name": us, ...} in stamp order; a name stamped again gets a "#2", "#3" suffix.
  LogLine& Add(const char* key, const PhaseStamp* stamps, size_t count);
  // Writes the line to stderr in one piece; lines of concurrent threads never interleave.
  void Write();

 private:
  rapidjson::StringBuffer buffer_;
  rapidjson::Writer<rapidjson::StringBuffer> writer_;
};

}  // namespace sandrun::util
