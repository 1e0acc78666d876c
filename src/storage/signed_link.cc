#include "storage/signed_link.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <new>
#include <string_view>

#include "storage/digest.h"
#include "util/relative_path.h"
#include "util/text.h"

namespace sandrun::storage {
namespace {

// Base64url without padding (RFC 4648 §5): what nginx's secure_link expects in place of
// standard base64 ("+" -> "-", "/" -> "_", "=" dropped; see the module's documentation and
// ngx_decode_base64url, which accepts the unpadded form).
std::string Base64UrlNoPad(const unsigned char* data, size_t size) {
  std::string out(4 * ((size + 2) / 3) + 1, '\0');  // EVP_EncodeBlock NUL-terminates
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data, static_cast<int>(size));
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  while (!out.empty() && out.back() == '=') out.pop_back();
  for (char& c : out) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  return out;
}

bool IsUnreserved(unsigned char c) {
  // RFC 3986 §2.3: ALPHA / DIGIT / "-" / "." / "_" / "~". Tested by value, not with isalnum,
  // so the locale cannot widen the set.
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

}  // namespace

std::string SecureLinkMd5(const std::string& uri, int64_t expires_epoch_s,
                          const std::string& secret) {
  // Same string nginx builds from "$secure_link_expires$uri <secret>": the expiry in decimal,
  // the decoded URI, one space, the secret.
  const std::string input = std::to_string(expires_epoch_s) + uri + " " + secret;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // MD5 is what nginx's secure_link checks, not our choice; its weakness matters less here as
  // the secret is unknown to the client. EVP_Digest fails only when no provider offers MD5
  // (an OpenSSL FIPS-only configuration): then the link carries no valid signature and nginx
  // refuses it with 403, which is the safe outcome.
  if (EVP_Digest(input.data(), input.size(), md, &len, EVP_md5(), nullptr) != 1) return {};
  return Base64UrlNoPad(md, len);
}

std::string PercentEncodePath(const std::string& path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(path.size());
  for (const char ch : path) {
    const auto c = static_cast<unsigned char>(ch);
    if (IsUnreserved(c) || c == '/') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

std::string LinkBaseUrl(const std::string& proto, const std::string& host,
                        const std::string& prefix) {
  const std::string scheme = proto == "https" ? "https" : "http";
  bool host_ok = !host.empty() && host.size() <= 255;
  for (const char c : host) {
    host_ok = host_ok &&
              (IsUnreserved(static_cast<unsigned char>(c)) || c == ':' || c == '[' || c == ']') &&
              c != '_' && c != '~';
  }
  std::string path = prefix;
  while (!path.empty() && path.back() == '/') path.pop_back();
  // An absolute URL path whose rest is a relative path by the one rule set (no empty, "." or
  // ".." segment; util/relative_path.h) of unreserved characters only.
  const bool path_ok =
      path.empty() || (path.size() <= 200 && path[0] == '/' &&
                       util::RelativePathError(std::string_view(path).substr(1)).empty() &&
                       std::all_of(path.begin(), path.end(),
                                   [](unsigned char c) { return c == '/' || IsUnreserved(c); }));
  return scheme + "://" + (host_ok ? host : "127.0.0.1") + (path_ok ? path : "");
}

std::string UserDir(const std::string& user, const std::string& key) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // HMAC() returns NULL only when memory runs out (SHA-256 is always available); report it the
  // way every std::string allocation here already does rather than invent a directory name.
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(user.data()), user.size(), md, &len) == nullptr) {
    throw std::bad_alloc();
  }
  // 128 bits of the HMAC: ample against guessing, and keeps URLs short.
  return util::HexEncode(std::string_view(reinterpret_cast<const char*>(md), len)).substr(0, 32);
}

}  // namespace sandrun::storage
