// The events of a run as it happens (a streamed POST /run, docs/DESIGN.md "Streamed /run"):
// the plan, a step starting, its output as it comes, its end, then the displays, files and
// the result of the plain answer. EventSink is what the pipeline reports to; NdjsonSink turns
// the events into one JSON line each for a LineWriter (the HTTP edge's). Knows nothing of HTTP.
// Not thread-safe: one run's thread reports to its sink.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sandbox/spec.h"

namespace sandrun::run {

enum class Stream { kStdout, kStderr };

// What the pipeline reports. JSON arguments are complete JSON texts (the plain answer's
// parts, encoded by the caller).
class EventSink {
 public:
  virtual ~EventSink() = default;
  // The run's output_bytes: no program output is reported past it, in all.
  virtual void OutputBudget(uint64_t bytes) = 0;
  virtual void Plan(const std::string& plan_json) = 0;
  virtual void Step(int index, const std::string& language) = 0;
  // Bytes of output of step `index` as the program wrote them (any bytes).
  virtual void Output(int index, Stream stream, std::string_view bytes) = 0;
  // `status` as in the plain answer's snippets[]; exit_code when the step exited.
  virtual void StepEnd(int index, const std::string& status, std::optional<int> exit_code) = 0;
  virtual void Display(const std::string& display_json) = 0;
  virtual void File(const std::string& file_json) = 0;
  virtual void Result(const std::string& result_json) = 0;
  virtual void Error(const std::string& code, const std::string& message) = 0;
  // Called at least every sandbox::OutputObserver::kTickMs while code runs: sends what is
  // due. False once the client has gone: the run should end.
  virtual bool Tick() = 0;
};

// Where the lines go: the HTTP edge's response. Each call returns false once the client
// cannot be reached any more (a failed write, a closed connection).
class LineWriter {
 public:
  virtual ~LineWriter() = default;
  // Sends the stream's head (200, application/x-ndjson); called once, before any line.
  virtual bool Begin() = 0;
  // Writes `lines` (each ending in '\n') and flushes them to the client.
  virtual bool Write(const std::string& lines) = 0;
  // Whether the client is still connected; does not block.
  virtual bool Connected() = 0;
};

// Events as NDJSON lines. The stream begins (LineWriter::Begin) at the first step or at the
// result, whichever comes first, so that a refusal before any code ran can still be a
// plain HTTP error (Begun() tells). Output is coalesced: sent when kFlushEvery has passed
// since the oldest unsent byte or kFlushBytes are waiting, and at every other event; in
// order; valid UTF-8 (invalid bytes replaced, a character split between reads kept whole);
// at most `output_budget` bytes of program output in all (the run's output_bytes).
class NdjsonSink : public EventSink {
 public:
  static constexpr std::chrono::milliseconds kFlushEvery{50};
  static constexpr size_t kFlushBytes = 16 << 10;
  explicit NdjsonSink(LineWriter* writer) : writer_(writer) {}
  void OutputBudget(uint64_t bytes) override { budget_ = bytes; }
  bool Begun() const { return begun_; }
  // False once a write failed or the client went away.
  bool Connected() const { return connected_; }

  void Plan(const std::string& plan_json) override;
  void Step(int index, const std::string& language) override;
  void Output(int index, Stream stream, std::string_view bytes) override;
  void StepEnd(int index, const std::string& status, std::optional<int> exit_code) override;
  void Display(const std::string& display_json) override;
  void File(const std::string& file_json) override;
  void Result(const std::string& result_json) override;
  void Error(const std::string& code, const std::string& message) override;
  bool Tick() override;

 private:
  struct Chunk {
    int index;
    Stream stream;
    std::string bytes;
  };
  // Queues `line` (begins the stream first when `begin`) and sends it with the output due.
  void Send(std::string line, bool begin);
  // The waiting output as stdout/stderr lines; `final`: also a character split at the end.
  std::string OutputLines(bool final);
  bool Flush(std::string lines);
  LineWriter* writer_;
  uint64_t budget_ = 0;
  uint64_t streamed_ = 0;  // output bytes taken so far (of budget_)
  bool begun_ = false, connected_ = true;
  std::string held_;           // lines before the stream began (the plan)
  std::vector<Chunk> chunks_;  // output not sent yet, in order
  size_t chunk_bytes_ = 0;
  std::chrono::steady_clock::time_point oldest_{};
  std::string carry_[2];  // per stream: the start of a character split between reads
  std::chrono::steady_clock::time_point last_check_{};
};

// The sandbox's or kernel's OutputObserver of step `index`: its output to `sink`, and the
// step's start and end. Without a sink it does nothing (observer() is null).
class StepEvents : public sandbox::OutputObserver {
 public:
  StepEvents(EventSink* sink, int index, const std::string& language);
  sandbox::OutputObserver* observer() { return sink_ ? this : nullptr; }
  void End(const std::string& status, std::optional<int> exit_code);
  void OnOutput(int fd, std::string_view bytes) override;
  bool Tick() override { return sink_ == nullptr || sink_->Tick(); }

 private:
  EventSink* sink_;
  int index_;
};

}  // namespace sandrun::run
