// Who may call POST /run and as whom (DESIGN.md additions, "Access"): the bearer token, the
// user it may act for, the request's Content-Type and its Origin. Pure decisions on values
// already read: no I/O, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "api/run_codec.h"
#include "config/config.h"

namespace sandrun::api {

// The caller as its bearer token identified it.
struct Caller {
  bool authenticated = false;            // false: 401
  const config::Token* token = nullptr;  // null: anonymous (allow_anonymous, no known token)
};

// Finds the token of `authorization` ("Bearer <token>") among `config.tokens`, comparing
// SHA-256 digests in constant time so that neither content nor length leaks through timing.
// Without a known token the caller is anonymous if the config allows it, else not
// authenticated.
Caller Authenticate(const std::string& authorization, const config::Config& config);

// Applies the token's binding to `run->user` (decoded from the body or X-Sandrun-User, with
// `run->user_named` saying whether either named one): a front end or an anonymous caller
// keeps the named user (default "anonymous"); a bound or plain token acts as its own user and
// may name no other. Errors: 403 user_forbidden naming the field `user`.
std::optional<ApiError> ApplyTokenBinding(const Caller& caller, RunRequest* run);

// Whether a client may read /healthz, /readyz and /metrics (run counts and durations, free
// disk, pool state): `remote_addr` (nginx's REMOTE_ADDR: the peer, or the client a proxy of
// trusted_proxies names in X-Forwarded-For, which no one else can set) is loopback, an
// address of this host, or in `config.health_allow`; or `authorization` carries a bearer
// token of the config (of any kind; allow_anonymous opens nothing here). Errors: 403
// forbidden naming the field health_allow.
std::optional<ApiError> CheckHealthAccess(const std::string& remote_addr,
                                          const std::string& authorization,
                                          const config::Config& config);

// True if `address` (IPv4 or IPv6 text) lies in `range` (an address or CIDR range, as
// config::IsAddressOrCidr accepts). An IPv4-mapped IPv6 address counts as its IPv4 address.
bool AddressInRange(const std::string& address, const std::string& range);

// POST /run takes only `application/json` (parameters allowed; a charset must be UTF-8), so
// that a web page cannot send it as a "simple" cross-site request (text/plain, form types)
// without a CORS preflight. Errors: 415 unsupported_media_type.
std::optional<ApiError> CheckContentType(const std::string& content_type);

// A request with an Origin header (sent by browsers) must come from one of `allowed`
// (exact match, case-insensitive, a trailing '/' ignored). No header: not a browser's
// cross-site request, allowed. Errors: 403 origin_forbidden.
std::optional<ApiError> CheckOrigin(const std::string& origin,
                                    const std::vector<std::string>& allowed);

}  // namespace sandrun::api
