#include "util/base64.h"

#include <openssl/evp.h>

#include <cctype>

namespace sandrun::util {
namespace {

bool InAlphabet(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/';
}

bool Whitespace(char c) { return c == '\n' || c == '\r' || c == ' ' || c == '\t'; }

}  // namespace

std::optional<std::string> DecodeBase64(std::string_view text, Base64Whitespace whitespace) {
  std::string clean;
  clean.reserve(text.size());
  for (char c : text) {
    if (whitespace == Base64Whitespace::kSkipped && Whitespace(c)) continue;
    if (!InAlphabet(c) && c != '=') return std::nullopt;
    clean.push_back(c);
  }
  const size_t first_pad = clean.find('=');
  if (clean.size() % 4 != 0 ||
      (first_pad != std::string::npos &&
       (clean.size() - first_pad > 2 || clean.find_first_not_of('=', first_pad) != clean.npos))) {
    return std::nullopt;
  }
  std::string out(clean.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(clean.data()),
                                static_cast<int>(clean.size()));
  if (n < 0) return std::nullopt;
  size_t pad = 0;
  if (!clean.empty() && clean.back() == '=') ++pad;
  if (clean.size() > 1 && clean[clean.size() - 2] == '=') ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

}  // namespace sandrun::util
