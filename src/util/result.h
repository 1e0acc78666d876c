// Result<T>: the in-house expected type (docs/STYLE.md "Errors"), and the error contract of the
// whole daemon. Boost 1.74 has no boost::system::result and we are not on C++23, so this is a
// small std::variant wrapper.
//
// The error contract (as crun's error.h): every expected failure is an Error of one of the
// ErrorKinds below, the errno that caused it (0 if none) and a message for people that names
// the call and its arguments. Modules choose the kind that says what went wrong; they never
// choose an HTTP status or an API code. The API (api/errors.h; the table is errors.cc) is the
// one place that maps a kind to an HTTP status and an API code:
//
//   kind             meaning                                                 HTTP  API code
//   kSystem          a system call, library or host facility failed; `err`   500   internal
//                    holds its errno when one was read
//   kInvalidInput    a value from a caller or the operator breaks a stated   400   invalid_input
//                    rule (a config key, a CIDR)
//   kInvalidPath     a workspace path that is not a plain relative path, or  400   invalid_path
//                    whose directories or file cannot be made
//   kFileLimit       a write hit a file or workspace limit (ENOSPC, EDQUOT,  400   file_limit
//                    EFBIG: the workspace or disk is full)
//   kOverBudget      a copy would pass a quota; found before anything past   400   over_budget
//                    it was written
//   kTooLarge        an input is past a size bound (a message, its blocks)   400   too_large
//   kBadBlock        a markdown block number that does not exist, or a       400   bad_block
//                    chosen block that cannot run
//   kNoRunnableCode  a markdown message without a runnable code block        400   no_runnable_code
//   kBusy            held by another run of the same session (its lock)      409   session_busy
//   kUnavailable     no capacity now (all kernels leased, or stopping):      503   busy
//                    retry later
//   kProtocol        a peer (a Jupyter kernel, an init plan's bytes) broke   500   internal
//                    its protocol
//   kRefused         a step refused and has already answered for itself;     500   internal
//                    the caller holds that answer
//
// Where a handler has always answered a failed step with its own 500 code ("storage",
// "sandbox_error"), it keeps that code: the statuses and codes clients see do not change.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace sandrun {

// What kind of failure an Error is; the table above says each one's meaning and HTTP mapping.
enum class ErrorKind {
  kSystem,
  kInvalidInput,
  kInvalidPath,
  kFileLimit,
  kOverBudget,
  kTooLarge,
  kBadBlock,
  kNoRunnableCode,
  kBusy,
  kUnavailable,
  kProtocol,
  kRefused,
};

// The kind's name in snake_case ("system", "file_limit"), for logs and tests.
inline const char* ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kSystem:
      return "system";
    case ErrorKind::kInvalidInput:
      return "invalid_input";
    case ErrorKind::kInvalidPath:
      return "invalid_path";
    case ErrorKind::kFileLimit:
      return "file_limit";
    case ErrorKind::kOverBudget:
      return "over_budget";
    case ErrorKind::kTooLarge:
      return "too_large";
    case ErrorKind::kBadBlock:
      return "bad_block";
    case ErrorKind::kNoRunnableCode:
      return "no_runnable_code";
    case ErrorKind::kBusy:
      return "busy";
    case ErrorKind::kUnavailable:
      return "unavailable";
    case ErrorKind::kProtocol:
      return "protocol";
    case ErrorKind::kRefused:
      return "refused";
  }
  return "unknown";
}

// An expected failure: its kind, the errno that caused it (0 if none) and a message that
// names the call and its arguments.
struct Error {
  ErrorKind kind = ErrorKind::kSystem;
  int err = 0;
  std::string message;
};

inline Error MakeError(ErrorKind kind, std::string message, int err = 0) {
  return Error{kind, err, std::move(message)};
}

// A value or an error. `E` is Error everywhere but at the API's edge, where a decoder's
// refusal is already an API error (run_codec.h: Result<RunRequest, ApiError>).
template <typename T, typename E = Error>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(E error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const E& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, E> v_;
};

// Result<void> equivalent.
struct Ok {};
using Status = Result<Ok>;
inline Status OkStatus() { return Ok{}; }

}  // namespace sandrun
