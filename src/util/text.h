// Pure text helpers (no side effects, except RandomHex which reads the CSPRNG).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

namespace sandrun::util {

// Returns `in` with every invalid UTF-8 sequence (overlong forms, surrogates, code points
// above U+10FFFF, truncated sequences) replaced by U+FFFD, one per maximal invalid subpart
// (Unicode 15, §3.9 "U+FFFD Substitution of Maximal Subparts").
std::string SanitizeUtf8(std::string_view in);

// `bytes` random bytes from OpenSSL's CSPRNG, hex-encoded (2 * bytes chars).
std::string RandomHex(size_t bytes);

// Hex encoding of raw bytes, lower case.
std::string HexEncode(std::string_view bytes);

// Bounded capture of a stream that keeps its head and its tail: the first `head_cap` bytes
// and the last `tail_cap` bytes are kept, everything between is counted and dropped.
class HeadTailBuffer {
 public:
  HeadTailBuffer(size_t head_cap, size_t tail_cap) : head_cap_(head_cap), tail_cap_(tail_cap) {}
  void Append(std::string_view data);
  size_t total_bytes() const { return total_; }
  // True when Text() leaves bytes out. tail_ may hold up to twice tail_cap between trims: only
  // tail_cap of it counts as kept (it once made a cut stream read as whole).
  bool truncated() const { return total_ > head_.size() + std::min(tail_.size(), tail_cap_); }
  // Head, then (when bytes were dropped) a marker line naming how many, then the tail.
  std::string Text() const;

 private:
  size_t head_cap_;
  size_t tail_cap_;
  size_t total_ = 0;
  std::string head_;
  std::string tail_;  // ring kept as a string trimmed from the front
};

}  // namespace sandrun::util
