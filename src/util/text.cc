#include "util/text.h"

#include <openssl/rand.h>

#include <stdexcept>

namespace sandrun::util {

std::string SanitizeUtf8(std::string_view in) {
  static constexpr char kReplacement[] = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(in.size());
  size_t i = 0;
  const size_t n = in.size();
  auto byte = [&](size_t k) { return static_cast<unsigned char>(in[k]); };
  while (i < n) {
    unsigned char c = byte(i);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte (Table 3-7)
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;  // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      out += kReplacement;
      ++i;
      continue;
    }
    size_t k = 1;
    for (; k < len && i + k < n; ++k) {
      unsigned char b = byte(i + k);
      unsigned char min = (k == 1) ? lo : 0x80, max = (k == 1) ? hi : 0xBF;
      if (b < min || b > max) break;
    }
    if (k == len) {
      out.append(in.substr(i, len));
    } else {
      out += kReplacement;
    }
    i += k;
  }
  return out;
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1) {
    // OpenSSL's DRBG failing means the host has no entropy source; nothing sane to do.
    std::abort();
  }
  return HexEncode(raw);
}

void HeadTailBuffer::Append(std::string_view data) {
  total_ += data.size();
  if (head_.size() < head_cap_) {
    size_t take = std::min(head_cap_ - head_.size(), data.size());
    head_.append(data.substr(0, take));
    data.remove_prefix(take);
  }
  if (data.empty() || tail_cap_ == 0) return;
  if (data.size() >= tail_cap_) {
    tail_.assign(data.substr(data.size() - tail_cap_));
  } else {
    tail_.append(data);
    if (tail_.size() > 2 * tail_cap_) tail_.erase(0, tail_.size() - tail_cap_);
  }
}

std::string HeadTailBuffer::Text() const {
  std::string tail = tail_.size() > tail_cap_ ? tail_.substr(tail_.size() - tail_cap_) : tail_;
  size_t kept = head_.size() + tail.size();
  if (total_ <= kept) return head_ + tail;
  std::string out = head_;
  if (!out.empty() && out.back() != '\n') out.push_back('\n');
  out += "[... sandrun: " + std::to_string(total_ - kept) + " bytes of output omitted ...]\n";
  out += tail;
  return out;
}

}  // namespace sandrun::util
