#include "util/json_log.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string_view>

#include "util/text.h"

namespace sandrun::util {
namespace {

std::mutex g_write_mu;

std::string NowRfc3339() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char when[96];
  std::snprintf(when, sizeof when, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return when;
}

}  // namespace

LogLine::LogLine(const char* event) : writer_(buffer_) {
  writer_.StartObject();
  Add("time", NowRfc3339());
  Add("event", std::string(event));
}

LogLine& LogLine::Add(const char* key, const std::string& value) {
  const std::string clean = SanitizeUtf8(value);
  writer_.Key(key);
  writer_.String(clean.data(), static_cast<rapidjson::SizeType>(clean.size()));
  return *this;
}

LogLine& LogLine::Add(const char* key, int64_t value) {
  writer_.Key(key);
  writer_.Int64(value);
  return *this;
}

LogLine& LogLine::Add(const char* key, const std::vector<std::string>& values) {
  writer_.Key(key);
  writer_.StartArray();
  for (const auto& v : values) {
    const std::string clean = SanitizeUtf8(v);
    writer_.String(clean.data(), static_cast<rapidjson::SizeType>(clean.size()));
  }
  writer_.EndArray();
  return *this;
}

LogLine& LogLine::Add(const char* key, const PhaseStamp* stamps, size_t count) {
  writer_.Key(key);
  writer_.StartObject();
  for (size_t i = 0; i < count; ++i) {
    int seen = 1;
    for (size_t j = 0; j < i; ++j) seen += std::string_view(stamps[j].name) == stamps[i].name;
    std::string name = stamps[i].name;
    if (seen > 1) name += "#" + std::to_string(seen);
    writer_.Key(name.data(), static_cast<rapidjson::SizeType>(name.size()));
    writer_.Int64(stamps[i].us);
  }
  writer_.EndObject();
  return *this;
}

void LogLine::Write() {
  writer_.EndObject();
  std::lock_guard lock(g_write_mu);
  std::fprintf(stderr, "%s\n", buffer_.GetString());
  std::fflush(stderr);
}

}  // namespace sandrun::util
