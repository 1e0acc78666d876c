// Whether a run's session is the one the client had (docs/CLUSTER.md). A
// session is named by the client (`session`, X-Sandrun-Session) and lives on one node's disk.
// When that node is gone and the front nginx sends the user to another node, that node has
// no trace of the session and starts it empty; the client must be told so, or it would
// believe files from earlier runs are still there. A node cannot tell by itself "new to me"
// from "new": the very first run of every session is new to its node too. So the client
// says which it expects: X-Sandrun-Session-Seen: 1 on every run after its first answer for
// the session. A run of a session the node had to create while that header says 1 answers
// session_restarted: true (the session was lost: another node held it, or it expired as
// idle); every other session run answers session_restarted: false.
#pragma once

#include <optional>
#include <string>

#include "api/run_codec.h"

namespace sandrun::api {

// The X-Sandrun-Session-Seen header: "" or "0" = false, "1" = true. Anything else: a 400
// ApiError (code "wrong_type", field "X-Sandrun-Session-Seen"). Pure.
std::optional<ApiError> DecodeSessionSeen(const std::string& header, bool* seen);

// session_restarted of a run: the client had seen the session (`seen`) and this node's
// session store had to create it (`created`, storage::SessionLock::created). Pure.
inline bool SessionRestarted(bool seen, bool created) { return seen && created; }

}  // namespace sandrun::api
