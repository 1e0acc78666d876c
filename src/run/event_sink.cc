#include "run/event_sink.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>

#include "util/text.h"

namespace sandrun::run {
namespace {

using Clock = std::chrono::steady_clock;
using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void String(JsonWriter& w, std::string_view text) {
  w.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
}

// {"event":<name>, ...members written by `body`}\n
template <typename Body>
std::string EventLine(const char* name, Body body) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("event");
  w.String(name);
  body(w);
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize()) + "\n";
}

// {"event":<name>,"<key>":<json>}\n with `json` a complete JSON text, copied as it is.
std::string RawEventLine(const char* name, const char* key, const std::string& json) {
  return std::string("{\"event\":\"") + name + "\",\"" + key + "\":" + json + "}\n";
}

// Where the last character of `bytes` would end if it is cut short: the size of the whole
// characters before a trailing incomplete UTF-8 sequence (bytes.size() when there is none).
size_t WholeCharacters(std::string_view bytes) {
  const size_t n = bytes.size();
  for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
    const auto c = static_cast<unsigned char>(bytes[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t want = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return want > back ? n - back : n;
  }
  return n;
}

}  // namespace

void NdjsonSink::Send(std::string line, bool begin) {
  if (!connected_) return;
  if (!begun_ && !begin) {
    held_ += line;
    return;
  }
  std::string lines = OutputLines(false);
  if (!begun_) {
    begun_ = true;
    if (!writer_->Begin()) {
      connected_ = false;
      return;
    }
    lines = std::move(held_) + lines;
  }
  (void)Flush(std::move(lines) + line);
}

bool NdjsonSink::Flush(std::string lines) {
  if (connected_ && !lines.empty() && !writer_->Write(lines)) connected_ = false;
  return connected_;
}

std::string NdjsonSink::OutputLines(bool final) {
  std::string lines;
  for (Chunk& chunk : chunks_) {
    std::string& carry = carry_[chunk.stream == Stream::kStdout ? 0 : 1];
    std::string bytes = std::move(carry) + chunk.bytes;
    const size_t whole = final ? bytes.size() : WholeCharacters(bytes);
    carry = bytes.substr(whole);
    bytes.resize(whole);
    if (bytes.empty()) continue;
    const bool out = chunk.stream == Stream::kStdout;
    lines += EventLine(out ? "stdout" : "stderr", [&](JsonWriter& w) {
      w.Key("index");
      w.Int(chunk.index);
      w.Key("text");
      String(w, util::SanitizeUtf8(bytes));
    });
  }
  chunks_.clear();
  chunk_bytes_ = 0;
  if (final) {
    carry_[0].clear();
    carry_[1].clear();
  }
  return lines;
}

void NdjsonSink::Plan(const std::string& plan_json) {
  Send(RawEventLine("plan", "plan", plan_json), false);
}

void NdjsonSink::Step(int index, const std::string& language) {
  Send(EventLine("step",
                 [&](JsonWriter& w) {
                   w.Key("index");
                   w.Int(index);
                   w.Key("language");
                   String(w, language);
                 }),
       true);
}

void NdjsonSink::Output(int index, Stream stream, std::string_view bytes) {
  if (!connected_ || streamed_ >= budget_) return;
  bytes =
      bytes.substr(0, static_cast<size_t>(std::min<uint64_t>(bytes.size(), budget_ - streamed_)));
  streamed_ += bytes.size();
  if (chunks_.empty()) oldest_ = Clock::now();
  if (!chunks_.empty() && chunks_.back().index == index && chunks_.back().stream == stream) {
    chunks_.back().bytes.append(bytes);
  } else {
    chunks_.push_back({index, stream, std::string(bytes)});
  }
  chunk_bytes_ += bytes.size();
  if (chunk_bytes_ >= kFlushBytes) (void)Tick();
}

void NdjsonSink::StepEnd(int index, const std::string& status, std::optional<int> exit_code) {
  if (!connected_) return;
  std::string lines = OutputLines(true);
  lines += EventLine("step_end", [&](JsonWriter& w) {
    w.Key("index");
    w.Int(index);
    w.Key("status");
    String(w, status);
    if (exit_code) {
      w.Key("exit_code");
      w.Int(*exit_code);
    }
  });
  Send(std::move(lines), true);
}

void NdjsonSink::Display(const std::string& display_json) {
  Send(RawEventLine("display", "display", display_json), true);
}

void NdjsonSink::File(const std::string& file_json) {
  Send(RawEventLine("file", "file", file_json), true);
}

void NdjsonSink::Result(const std::string& result_json) {
  Send(RawEventLine("result", "result", result_json), true);
}

void NdjsonSink::Error(const std::string& code, const std::string& message) {
  Send(EventLine("error",
                 [&](JsonWriter& w) {
                   w.Key("error");
                   w.StartObject();
                   w.Key("code");
                   String(w, code);
                   w.Key("message");
                   String(w, util::SanitizeUtf8(message));
                   w.EndObject();
                 }),
       true);
}

bool NdjsonSink::Tick() {
  if (!connected_) return false;
  const auto now = Clock::now();
  const bool due =
      !chunks_.empty() && (chunk_bytes_ >= kFlushBytes || now - oldest_ >= kFlushEvery);
  if (due && begun_) return Flush(OutputLines(false));
  // A silent run: the connection itself says whether the client is still there.
  if (now - last_check_ >= kFlushEvery) {
    last_check_ = now;
    if (!writer_->Connected()) connected_ = false;
  }
  return connected_;
}

StepEvents::StepEvents(EventSink* sink, int index, const std::string& language)
    : sink_(sink), index_(index) {
  if (sink_) sink_->Step(index, language);
}

void StepEvents::End(const std::string& status, std::optional<int> exit_code) {
  if (sink_) sink_->StepEnd(index_, status, exit_code);
}

void StepEvents::OnOutput(int fd, std::string_view bytes) {
  if (sink_) sink_->Output(index_, fd == 2 ? Stream::kStderr : Stream::kStdout, bytes);
}

}  // namespace sandrun::run
