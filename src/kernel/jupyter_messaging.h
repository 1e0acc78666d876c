// The Jupyter messaging protocol, wire level (jupyter_client "Messaging in Jupyter", protocol
// 5.3): a message is a list of ZeroMQ frames — routing identities, the delimiter
// "<IDS|MSG>", the HMAC-SHA256 signature (lowercase hex) of the next four frames, then the
// JSON header, parent_header, metadata and content. Pure functions: no sockets here
// (kernel.h's Kernel sends and receives the frames over its ZeroMQ sockets).
//
// Everything a kernel sends is untrusted: the user's code runs in the kernel process and
// knows its key. Decoding checks the signature and the shapes and never trusts sizes.
#pragma once

#include <rapidjson/document.h>

#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace sandrun::kernel {

inline constexpr char kDelimiter[] = "<IDS|MSG>";

// HMAC-SHA256 over the concatenation of `parts` with `key`, as 64 lowercase hex digits.
std::string SignParts(std::string_view key, const std::vector<std::string>& parts);

// A message to send. `content_json` must be a JSON object.
struct OutgoingMessage {
  std::string msg_id;    // unique per message (e.g. random hex)
  std::string session;   // the client's session id, the same for all its messages
  std::string msg_type;  // "execute_request", "kernel_info_request", "interrupt_request", ...
  std::string content_json = "{}";
  std::string date;  // ISO 8601, e.g. "2026-12-01T21:00:00.000000Z"
};

// The frames of `message`: delimiter, signature, header, parent_header ({}), metadata ({}),
// content.
std::vector<std::string> EncodeMessage(const OutgoingMessage& message, std::string_view key);

// A received message. `content` is an object (checked).
struct IncomingMessage {
  std::string msg_type;       // header.msg_type
  std::string parent_msg_id;  // parent_header.msg_id, "" when none
  rapidjson::Document content;
};

// Decodes the frames of a received message: skips identities up to the delimiter, checks
// the signature in constant time, parses header, parent_header and content (each a JSON
// object; header.msg_type a string). Errors: kProtocol, naming what is wrong.
Result<IncomingMessage> DecodeMessage(const std::vector<std::string>& frames, std::string_view key);

// `text` without ANSI escape sequences (CSI "ESC [ ... final byte", OSC "ESC ] ... BEL|ST",
// and two-byte "ESC x"), as IPython colours its tracebacks.
std::string StripAnsi(std::string_view text);

// The content of an execute_request for `code` (JSON object text): not silent, stored in
// the history, no stdin, stop on error.
std::string ExecuteRequestContent(const std::string& code);

// The connection file of a kernel bound on ipc sockets `<path_prefix>-1` (shell), -2
// (iopub), -3 (stdin), -4 (control), -5 (heartbeat), signed with `key`.
std::string ConnectionFileJson(const std::string& path_prefix, const std::string& key);

}  // namespace sandrun::kernel
