// Base64 (RFC 4648 section 4, the standard alphabet with '=' padding), decoded with OpenSSL's
// EVP_DecodeBlock after a strict check of the alphabet and the padding (EVP_DecodeBlock itself
// skips surrounding whitespace and takes "===="). Pure; allocates, so not for use after fork.
// The one decoder of the daemon: request files, kernel images, the start-up bytecode.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sandrun::util {

enum class Base64Whitespace {
  kRefused,  // any byte outside the alphabet is an error (request fields)
  kSkipped,  // line breaks, spaces and tabs are dropped first (MIME bodies: RFC 2045 6.8)
};

// The bytes `text` encodes; nullopt when it is not valid base64 (a byte outside the alphabet,
// a length that is not a multiple of 4, '=' other than one or two at the end).
std::optional<std::string> DecodeBase64(std::string_view text,
                                        Base64Whitespace whitespace = Base64Whitespace::kRefused);

}  // namespace sandrun::util
