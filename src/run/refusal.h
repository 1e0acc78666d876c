// What the run engine (engine.h) answers instead of a result when it does not run a request:
// a typed refusal, no HTTP status. api/errors.cc alone maps it to an API error. Pure data.
#pragma once

#include <cstdint>
#include <string>

#include "util/result.h"

namespace sandrun::run {

// Why the engine refused a run (api/errors.cc maps each to its HTTP status and API code).
enum class RefusalCode {
  kError,                // an Error of a phase: `error_kind` says which (ToApiError's mapping)
  kUnknownLanguage,      // a markdown block in a language the config does not run
  kConflictingFields,    // fields that do not go together (stateful with packages, stdin, ...)
  kNetworkForbidden,     // the environment needs the network, which the config forbids
  kMemoryLimit,          // the session's files do not fit the run's memory
  kFileLimit,            // the session's files do not fit the run's workspace
  kSessionBusy,          // the session's waiters are full
  kStorage,              // the session or workspace store failed
  kSandboxError,         // a sandbox (its cgroup, directory or kernel) could not be made
  kBusy,                 // every sandbox (or kernel) is busy
  kUnavailable,          // the host cannot run this (no cgroups, no freezer)
  kStopping,             // the daemon is stopping
  kEnvironmentBuilding,  // the prepared environment is being built
};

// A run the engine did not run (or stopped before its steps): what, why, and when to retry.
struct Refusal {
  RefusalCode code = RefusalCode::kError;
  std::string message;
  std::string field;                          // the request's field at fault ("" if none)
  ErrorKind error_kind = ErrorKind::kSystem;  // with kError: the phase's Error kind
  int64_t retry_after_s = 0;                  // > 0: the client may retry after this long
};

// A refusal of `code` with `message` (and `field`), no retry.
Refusal Refuse(RefusalCode code, std::string message, std::string field = "");
// The refusal of a phase's `error` (its kind says which API error it is), naming `field`.
Refusal RefuseError(const Error& error, std::string field);

}  // namespace sandrun::run
