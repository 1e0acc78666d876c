// The JSON of Jupyter's server API as sandrun speaks it (docs/DESIGN.md, "Additions: a Jupyter
// server API"): the messages of the channels WebSocket (Jupyter messaging v5.3 in JSON text
// frames, the `channel` field saying shell, iopub, stdin or control, as jupyter_server sends
// them), the REST models, and the small parsers of the HTTP edge (query, cookies, form).
// Pure functions, thread-safe.
#pragma once

#include <rapidjson/document.h>

#include <map>
#include <string>
#include <vector>

#include "util/result.h"

namespace sandrun::jupyter {

// A message a client sent on the channels WebSocket.
struct ClientMessage {
  std::string channel;      // "shell" when the client named none
  std::string msg_type;     // header.msg_type
  rapidjson::Document doc;  // the whole message; doc["header"] and doc["content"] are objects
  const rapidjson::Value& header() const { return doc["header"]; }
  const rapidjson::Value& content() const { return doc["content"]; }
};

// Parses a text frame: a JSON object with `header` (an object with string msg_id and msg_type)
// and `content` (an object; {} when absent). Errors: kInvalidInput naming what is wrong.
Result<ClientMessage> ParseClientMessage(const std::string& text);

// A message to the client on `channel`: a new header (msg_id, msg_type, session, date,
// username "sandrun", version 5.3), msg_id and msg_type also at the top level (clients read
// them there), `parent_header` (the client's request header) and `content`.
std::string MessageToClient(const std::string& channel, const std::string& msg_type,
                            const rapidjson::Value& parent_header, const rapidjson::Value& content,
                            const std::string& session);
// As above with `content_json` (a JSON object's text).
std::string MessageToClient(const std::string& channel, const std::string& msg_type,
                            const rapidjson::Value& parent_header, const std::string& content_json,
                            const std::string& session);

// The content sent to the kernel for a client's execute_request content `c`: code (a string,
// else kInvalidInput), silent, store_history, user_expressions, allow_stdin as the client
// gave them (Jupyter's defaults otherwise), stop_on_error false (the server applies the
// client's: StopOnError), and "sandrun_stdin": "client" (input() is then ipykernel's: an
// input_request to the client with allow_stdin, else StdinNotImplementedError).
Result<std::string> KernelExecuteContent(const rapidjson::Value& c);
// Whether a failed execute with content `c` aborts the executes queued behind it (Jupyter's
// stop_on_error, true unless false).
bool StopOnError(const rapidjson::Value& c);
// The execute_reply of an execute aborted so: {"status": "aborted", "execution_count": null}.
std::string AbortedReplyContent();
// The content sent to the kernel for a client's input_reply content `c`: {"value": c.value}
// ("" when it is not a string), valid UTF-8.
std::string InputReplyContent(const rapidjson::Value& c);

// Contents sandrun writes itself (a limit's note, a cell that could not run); texts are made
// valid UTF-8 first.
// status: {"execution_state": state} ("busy", "idle").
std::string StatusContent(const std::string& state);
// stream: {"name": name ("stdout", "stderr"), "text": text}.
std::string StreamContent(const std::string& name, const std::string& text);
// error: {"ename", "evalue", "traceback": [traceback_line]}.
std::string ErrorContent(const std::string& ename, const std::string& evalue,
                         const std::string& traceback_line);
// execute_reply of a failed cell: {"status": "error", "execution_count", "ename", "evalue",
// "traceback": []}.
std::string ErrorReplyContent(int execution_count, const std::string& ename,
                              const std::string& evalue);

// A file an execute wrote, as the display that lists them shows it.
struct FileLink {
  std::string path;  // workspace-relative
  std::string url;   // the signed link
  uint64_t size = 0;
};
// A file the export skipped, and why (a run's files_skipped reason: too_large, too_many, ...).
struct SkippedLink {
  std::string path, reason;
};
// display_data content listing `files` and `skipped`: text/plain with one "path: url" line
// each (what Open WebUI's Code Interpreter shows), text/markdown and text/html with links (for
// JupyterLab). Control characters of paths are shown as '?', so a name cannot add a line; at
// most kMaxSkippedShown skipped ones are listed, then their count.
inline constexpr size_t kMaxSkippedShown = 20;
std::string FilesDisplayContent(const std::vector<FileLink>& files,
                                const std::vector<SkippedLink>& skipped);

// The content of a kernel_info_reply for sandrun's Python kernel.
std::string KernelInfoReplyContent();

// GET /api/kernelspecs (all) and /api/kernelspecs/python3 (one).
std::string KernelSpecsJson();
std::string KernelSpecJson();
inline constexpr char kKernelName[] = "python3";

// A kernel's REST model: {"id", "name", "last_activity", "execution_state", "connections"}.
struct KernelModel {
  std::string id;
  std::string last_activity;    // ISO 8601 UTC
  std::string execution_state;  // "idle", "busy"
  int connections = 0;
};
std::string KernelModelJson(const KernelModel& k);
std::string KernelListJson(const std::vector<KernelModel>& kernels);

// Jupyter's error body: {"message": message, "reason": reason}.
std::string ErrorJson(const std::string& message, const std::string& reason);

// `text` with %XX decoded (and '+' as a space when `plus_is_space`, as in forms); a bad
// escape stays as it is.
std::string PercentDecode(const std::string& text, bool plus_is_space);
// "a=1&b=2" (a query or an application/x-www-form-urlencoded body) as name -> value; the first
// of a repeated name wins.
std::map<std::string, std::string> ParseForm(const std::string& text);
// A Cookie header "a=1; b=2" as name -> value.
std::map<std::string, std::string> ParseCookies(const std::string& header);

// The current time as ISO 8601 UTC with microseconds ("2026-12-04T02:00:00.000000Z").
std::string IsoNow();

}  // namespace sandrun::jupyter
