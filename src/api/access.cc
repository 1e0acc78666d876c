#include "api/access.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <strings.h>

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

}  // namespace

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
    return ApiError{403, "user_forbidden",
                    "this bearer token may not act for user '" + util::SanitizeUtf8(run->user) +
                        "' (field 'user' or header X-Sandrun-User): it is bound to user '" + own +
                        "'" +
                        (plain ? " (a plain token; mark a front end's token `front_end` in "
                                 "tokens_file to let it name users)"
                               : ""),
                    "user"};
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
  return ApiError{415, "unsupported_media_type",
                  "POST /run takes a JSON body with the header Content-Type: application/json "
                  "(got " +
                      (content_type.empty() ? std::string("none")
                                            : "'" + util::SanitizeUtf8(content_type) + "'") +
                      ")",
                  "Content-Type"};
}

std::optional<ApiError> CheckOrigin(const std::string& origin,
                                    const std::vector<std::string>& allowed) {
  if (origin.empty()) return std::nullopt;
  std::string given = origin;
  while (!given.empty() && given.back() == '/') given.pop_back();
  for (const auto& entry : allowed) {
    if (::strcasecmp(entry.c_str(), given.c_str()) == 0) return std::nullopt;
  }
  return ApiError{403, "origin_forbidden",
                  "requests from web pages of origin '" + util::SanitizeUtf8(origin) +
                      "' (header Origin) are not allowed; list it in the config key "
                      "allowed_origins to allow them",
                  "Origin"};
}

}  // namespace sandrun::api
