// Result<T>: the in-house expected type (STYLE.md "Errors"). Boost 1.74 has no
// boost::system::result and we are not on C++23, so this is a small std::variant wrapper.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace sandrun {

// An expected failure: a short machine code, the errno that caused it (0 if none) and a
// message that names the call and its arguments.
struct Error {
  std::string code;
  int err = 0;
  std::string message;
};

inline Error MakeError(std::string code, std::string message, int err = 0) {
  return Error{std::move(code), err, std::move(message)};
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Result<void> equivalent.
struct Ok {};
using Status = Result<Ok>;
inline Status OkStatus() { return Ok{}; }

}  // namespace sandrun
