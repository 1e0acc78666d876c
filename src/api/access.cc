#include "api/access.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <strings.h>

#include <cstring>

#include "util/text.h"

namespace sandrun::api {
namespace {

std::string Trim(const std::string& text) {
  const size_t a = text.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  const size_t b = text.find_last_not_of(" \t");
  return text.substr(a, b - a + 1);
}

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// `text` as 16 bytes (IPv4 as ::ffff:a.b.c.d) in *out, and its prefix length offset (96 for
// IPv4, so that an IPv4 range's bits are counted after it); false if not an address.
bool ParseAddress(const std::string& text, unsigned char out[16], int* offset) {
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    std::memset(out, 0, 10);
    out[10] = out[11] = 0xff;
    std::memcpy(out + 12, &v4, 4);
    *offset = 96;
    return true;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6) != 1) return false;
  std::memcpy(out, &v6, 16);
  *offset = 0;
  return true;
}

// True if `address` is assigned to an interface of this host (its network namespace).
bool IsHostAddress(const std::string& address) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* i = list; i != nullptr && !found; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    if (i->ifa_addr->sa_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, text,
                sizeof text);
    } else {
      continue;
    }
    found = AddressInRange(address, text);
  }
  freeifaddrs(list);
  return found;
}

}  // namespace

bool AddressInRange(const std::string& address, const std::string& range) {
  const size_t slash = range.find('/');
  unsigned char a[16], r[16];
  int a_offset = 0, r_offset = 0;
  if (!ParseAddress(address, a, &a_offset) || !ParseAddress(range.substr(0, slash), r, &r_offset)) {
    return false;
  }
  int bits = 128;
  if (slash != std::string::npos) {
    const std::string length = range.substr(slash + 1);
    if (length.empty() || length.size() > 3 ||
        length.find_first_not_of("0123456789") != std::string::npos) {
      return false;
    }
    bits = r_offset + std::stoi(length);
    if (bits > 128) return false;
  }
  // An IPv6 range holds an IPv4 address only within ::ffff:0:0/96 (as nginx's allow: ::/0
  // is not every IPv4 address).
  if (a_offset == 96 && r_offset == 0 && bits < 96) return false;
  for (int i = 0; i < bits; ++i) {
    const unsigned char mask = static_cast<unsigned char>(0x80 >> (i % 8));
    if ((a[i / 8] & mask) != (r[i / 8] & mask)) return false;
  }
  return true;
}

std::optional<ApiError> CheckHealthAccess(const std::string& remote_addr,
                                          const std::string& authorization,
                                          const config::Config& config) {
  if (AddressInRange(remote_addr, "127.0.0.0/8") || AddressInRange(remote_addr, "::1")) {
    return std::nullopt;
  }
  for (const std::string& range : config.health_allow_ranges) {
    if (AddressInRange(remote_addr, range)) return std::nullopt;
  }
  if (IsHostAddress(remote_addr)) return std::nullopt;
  if (!authorization.empty() && Authenticate(authorization, config).token != nullptr) {
    return std::nullopt;
  }
  return MakeApiError(ApiCode::kForbidden,
                      "health and metrics answer only this host, the addresses of the config key "
                      "health_allow, and requests with a bearer token (Authorization: Bearer "
                      "<token>); this request came from " +
                          (remote_addr.empty() ? std::string("an unknown address")
                                               : util::SanitizeUtf8(remote_addr)),
                      "health_allow");
}

Caller Authenticate(const std::string& authorization, const config::Config& config) {
  const std::string prefix = "Bearer ";
  Caller caller;
  if (authorization.compare(0, prefix.size(), prefix) == 0) {
    unsigned char given[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(authorization.data() + prefix.size()),
           authorization.size() - prefix.size(), given);
    // Every token is compared, matched or not: the time taken does not say which matched.
    for (const auto& token : config.tokens) {
      unsigned char want[SHA256_DIGEST_LENGTH];
      SHA256(reinterpret_cast<const unsigned char*>(token.secret.data()), token.secret.size(),
             want);
      if (CRYPTO_memcmp(given, want, sizeof want) == 0 && caller.token == nullptr) {
        caller.token = &token;
      }
    }
  }
  caller.authenticated = caller.token != nullptr || config.allow_anonymous;
  return caller;
}

std::optional<ApiError> ApplyTokenBinding(const Caller& caller, RunRequest* run) {
  if (caller.token == nullptr || caller.token->kind == config::Token::Kind::kFrontEnd) {
    return std::nullopt;
  }
  const std::string& own = caller.token->user;
  if (run->user_named && run->user != own) {
    const bool plain = caller.token->kind == config::Token::Kind::kOwnUser;
    return MakeApiError(ApiCode::kUserForbidden,
                        "this bearer token may not act for user '" + util::SanitizeUtf8(run->user) +
                            "' (field 'user' or header X-Sandrun-User): it is bound to user '" +
                            own + "'" +
                            (plain ? " (a plain token; mark a front end's token `front_end` in "
                                     "tokens_file to let it name users)"
                                   : ""),
                        "user");
  }
  run->user = own;
  return std::nullopt;
}

std::optional<ApiError> CheckContentType(const std::string& content_type) {
  const size_t semicolon = content_type.find(';');
  const std::string media = Lower(Trim(content_type.substr(0, semicolon)));
  bool ok = media == "application/json";
  // Parameters: only a charset means anything for JSON (RFC 8259 §11 defines none); one
  // other than UTF-8 would be misread, so it is refused too.
  for (size_t start = semicolon; ok && start != std::string::npos;) {
    const size_t end = content_type.find(';', start + 1);
    const std::string param = Trim(content_type.substr(start + 1, end - start - 1));
    start = end;
    const size_t eq = param.find('=');
    if (Lower(Trim(param.substr(0, eq))) != "charset" || eq == std::string::npos) continue;
    std::string value = Lower(Trim(param.substr(eq + 1)));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    ok = value == "utf-8" || value == "utf8";
  }
  if (ok) return std::nullopt;
  return MakeApiError(ApiCode::kUnsupportedMediaType,
                      "POST /run takes a JSON body with the header Content-Type: application/json "
                      "(got " +
                          (content_type.empty() ? std::string("none")
                                                : "'" + util::SanitizeUtf8(content_type) + "'") +
                          ")",
                      "Content-Type");
}

std::optional<ApiError> CheckOrigin(const std::string& origin,
                                    const std::vector<std::string>& allowed) {
  if (origin.empty()) return std::nullopt;
  std::string given = origin;
  while (!given.empty() && given.back() == '/') given.pop_back();
  for (const auto& entry : allowed) {
    if (::strcasecmp(entry.c_str(), given.c_str()) == 0) return std::nullopt;
  }
  return MakeApiError(ApiCode::kOriginForbidden,
                      "requests from web pages of origin '" + util::SanitizeUtf8(origin) +
                          "' (header Origin) are not allowed; list it in the config key "
                          "allowed_origins to allow them",
                      "Origin");
}

}  // namespace sandrun::api
