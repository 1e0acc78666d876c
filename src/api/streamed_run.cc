// POST /run with Accept: application/x-ndjson: the run's events as JSON lines while it runs
// (docs/DESIGN.md "Streamed /run"). HandleRun reports the plan and each step (its start,
// output and end) to an NdjsonSink; here its end: the plain answer's displays and files, then
// the answer itself, or an error event when the run failed after the stream began. A refusal
// before any step started (validation, access, admission, workspace) is the plain answer.
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cctype>
#include <exception>
#include <string>

#include "api/service.h"
#include "run/event_sink.h"

namespace sandrun::api {
namespace {

constexpr char kNdjson[] = "application/x-ndjson";

std::string JsonText(const rapidjson::Value& value) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  value.Accept(w);
  return std::string(buffer.GetString(), buffer.GetSize());
}

// The members of the plain answer `body` a stream repeats as events of their own, then the
// answer as the result event.
void SendAnswer(const std::string& body, run::EventSink& sink) {
  rapidjson::Document doc;
  if (!doc.Parse(body.data(), body.size()).HasParseError() && doc.IsObject()) {
    for (const char* key : {"displays", "files"}) {
      auto it = doc.FindMember(key);
      if (it == doc.MemberEnd() || !it->value.IsArray()) continue;
      for (const auto& entry : it->value.GetArray()) {
        if (key[0] == 'd') {
          sink.Display(JsonText(entry));
        } else {
          sink.File(JsonText(entry));
        }
      }
    }
  }
  sink.Result(body);
}

// The code and message of an error answer {"error":{"code","message"}}.
void SendError(const std::string& body, run::EventSink& sink) {
  rapidjson::Document doc;
  std::string code = "internal", message = "the run failed";
  if (!doc.Parse(body.data(), body.size()).HasParseError() && doc.IsObject() &&
      doc.HasMember("error") && doc["error"].IsObject()) {
    const auto& error = doc["error"];
    if (error.HasMember("code") && error["code"].IsString()) code = error["code"].GetString();
    if (error.HasMember("message") && error["message"].IsString()) {
      message = error["message"].GetString();
    }
  }
  sink.Error(code, message);
}

}  // namespace

bool WantsStream(const HttpRequest& request) {
  if (request.stream == nullptr) return false;
  // Any media range of the Accept list that is application/x-ndjson (parameters aside).
  std::string accept = request.Header("accept");
  for (char& c : accept) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t start = 0;
  while (start <= accept.size()) {
    size_t end = accept.find(',', start);
    if (end == std::string::npos) end = accept.size();
    std::string range = accept.substr(start, end - start);
    range = range.substr(0, range.find(';'));
    const size_t first = range.find_first_not_of(" \t");
    const size_t last = range.find_last_not_of(" \t");
    if (first != std::string::npos && range.substr(first, last - first + 1) == kNdjson) {
      return true;
    }
    start = end + 1;
  }
  return false;
}

HttpResponse Service::HandleStreamedRun(const HttpRequest& request) {
  run::NdjsonSink sink(request.stream);
  HttpResponse http;
  try {
    http = HandleRun(request, /*trusted=*/false, &sink);
  } catch (const std::exception& e) {
    http = ErrorResponse(ApiCode::kInternal, "request " + request.request_id + ": " + e.what());
  } catch (...) {
    http = ErrorResponse(ApiCode::kInternal, "request " + request.request_id + " failed");
  }
  const bool answer = http.status == 200 && http.content_type == "application/json";
  // Refused before any step started: the plain answer, as a plain /run gives it.
  if (!answer && !sink.Begun()) return http;
  if (answer) {
    SendAnswer(http.body, sink);
  } else {
    SendError(http.body, sink);
  }
  http.streamed = true;
  return http;
}

}  // namespace sandrun::api
