#define BOOST_TEST_MODULE run_event_sink
#include "run/event_sink.h"

#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

using sandrun::run::LineWriter;
using sandrun::run::NdjsonSink;
using sandrun::run::Stream;

namespace {

// Records what the sink sends; `connected` false makes every later call fail.
struct RecordingWriter : LineWriter {
  int begins = 0;
  std::vector<std::string> writes;
  bool connected = true;
  bool Begin() override {
    ++begins;
    return connected;
  }
  bool Write(const std::string& lines) override {
    if (connected) writes.push_back(lines);
    return connected;
  }
  bool Connected() override { return connected; }
  std::string All() const {
    std::string all;
    for (const auto& w : writes) all += w;
    return all;
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(the_stream_begins_at_the_first_step_with_the_plan_first) {
  RecordingWriter writer;
  NdjsonSink sink(&writer);
  sink.OutputBudget(1000);
  sink.Plan("[{\"index\":0}]");
  BOOST_TEST(!sink.Begun());
  BOOST_TEST(writer.begins == 0);
  sink.Step(0, "python");
  BOOST_TEST(sink.Begun());
  BOOST_TEST(writer.begins == 1);
  sink.StepEnd(0, "ok", 0);
  sink.Result("{\"id\":\"x\"}");
  BOOST_TEST(writer.begins == 1);
  BOOST_TEST(writer.All() ==
             "{\"event\":\"plan\",\"plan\":[{\"index\":0}]}\n"
             "{\"event\":\"step\",\"index\":0,\"language\":\"python\"}\n"
             "{\"event\":\"step_end\",\"index\":0,\"status\":\"ok\",\"exit_code\":0}\n"
             "{\"event\":\"result\",\"result\":{\"id\":\"x\"}}\n");
}

BOOST_AUTO_TEST_CASE(small_output_is_coalesced_until_it_is_due) {
  RecordingWriter writer;
  NdjsonSink sink(&writer);
  sink.OutputBudget(1000);
  sink.Step(0, "bash");
  const size_t after_step = writer.writes.size();
  for (int i = 0; i < 10; ++i) sink.Output(0, Stream::kStdout, "ab");
  BOOST_TEST(writer.writes.size() == after_step);  // not due yet: nothing sent
  sink.Output(0, Stream::kStderr, "e");
  sink.Output(0, Stream::kStdout, "c");
  sink.StepEnd(0, "ok", std::nullopt);
  BOOST_TEST(writer.writes.size() == after_step + 1);
  BOOST_TEST(writer.writes.back() ==
             "{\"event\":\"stdout\",\"index\":0,\"text\":\"abababababababababab\"}\n"
             "{\"event\":\"stderr\",\"index\":0,\"text\":\"e\"}\n"
             "{\"event\":\"stdout\",\"index\":0,\"text\":\"c\"}\n"
             "{\"event\":\"step_end\",\"index\":0,\"status\":\"ok\"}\n");
}

BOOST_AUTO_TEST_CASE(a_full_buffer_is_sent_at_once) {
  RecordingWriter writer;
  NdjsonSink sink(&writer);
  sink.OutputBudget(1 << 20);
  sink.Step(0, "python");
  const size_t after_step = writer.writes.size();
  sink.Output(0, Stream::kStdout, std::string(NdjsonSink::kFlushBytes, 'x'));
  BOOST_TEST(writer.writes.size() == after_step + 1);
}

BOOST_AUTO_TEST_CASE(a_character_split_between_reads_stays_whole_and_bad_bytes_are_replaced) {
  RecordingWriter writer;
  NdjsonSink sink(&writer);
  sink.OutputBudget(1 << 20);
  sink.Step(0, "python");
  sink.Output(0, Stream::kStdout, std::string(NdjsonSink::kFlushBytes - 1, 'x') + "\xC3");
  sink.Output(0, Stream::kStdout, "");
  sink.Output(0, Stream::kStdout, std::string(1, 'y'));  // due now: 16 KiB waiting
  const std::string first = writer.All();
  BOOST_TEST(first.find("\xEF\xBF\xBD") == std::string::npos);  // the split byte waits
  sink.Output(0, Stream::kStdout, "\xA9 \xFF");
  sink.StepEnd(0, "ok", 0);
  const std::string all = writer.All();
  BOOST_TEST(all.find("y") != std::string::npos);
  BOOST_TEST(all.find("\xFF") == std::string::npos);
  BOOST_TEST(all.find("\xEF\xBF\xBD\"") != std::string::npos);  // \xFF replaced, at the end
}

BOOST_AUTO_TEST_CASE(output_past_the_budget_is_not_streamed) {
  RecordingWriter writer;
  NdjsonSink sink(&writer);
  sink.OutputBudget(10);
  sink.Step(0, "python");
  sink.Output(0, Stream::kStdout, "0123456");
  sink.Output(0, Stream::kStderr, "789abcdef");
  sink.Output(0, Stream::kStdout, "more");
  sink.StepEnd(0, "output_limit", std::nullopt);
  const std::string all = writer.All();
  BOOST_TEST(all.find("\"text\":\"0123456\"") != std::string::npos);
  BOOST_TEST(all.find("\"text\":\"789\"") != std::string::npos);
  BOOST_TEST(all.find("more") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_client_that_went_away_ends_the_ticks) {
  RecordingWriter writer;
  NdjsonSink sink(&writer);
  sink.OutputBudget(1 << 20);
  sink.Step(0, "python");
  BOOST_TEST(sink.Tick());
  writer.connected = false;
  sink.Output(0, Stream::kStdout, std::string(NdjsonSink::kFlushBytes, 'x'));  // write fails
  BOOST_TEST(!sink.Tick());
  BOOST_TEST(!sink.Connected());
}

BOOST_AUTO_TEST_CASE(a_silent_run_notices_the_closed_connection) {
  RecordingWriter writer;
  NdjsonSink sink(&writer);
  sink.Step(0, "python");
  writer.connected = false;
  BOOST_TEST(!sink.Tick());
}
