// Signed download links checked by nginx's secure_link module (DESIGN.md §2).
#pragma once

#include <cstdint>
#include <string>

namespace sandrun::storage {

// The value of the `md5` query argument nginx expects for
//   secure_link_md5 "$secure_link_expires$uri <secret>";
// i.e. base64url (RFC 4648 §5, no padding) of MD5(expires + uri + " " + secret).
// `uri` is the decoded path as nginx's $uri sees it (e.g. "/files/ab12/run/t.csv").
// Ref: https://nginx.org/en/docs/http/ngx_http_secure_link_module.html
std::string SecureLinkMd5(const std::string& uri, int64_t expires_epoch_s,
                          const std::string& secret);

// Percent-encodes each segment of a '/'-separated path (RFC 3986 unreserved chars kept,
// '/' kept as separator).
std::string PercentEncodePath(const std::string& path);

// The base URL of download links, "<proto>://<host><prefix>", from a request's (forwarded)
// scheme, host and path prefix. Each part is checked, as it may come from a header: a proto
// other than http/https becomes "http", a host outside [A-Za-z0-9.:[]-] (or empty) becomes
// "127.0.0.1", and a prefix that is not "/"-separated segments of RFC 3986 unreserved
// characters becomes "" (a trailing "/" is dropped). So no header can put a quote, a path
// trick or another URL into a link.
std::string LinkBaseUrl(const std::string& proto, const std::string& host,
                        const std::string& prefix);

// Keyed hash (HMAC-SHA256, hex, first 32 chars) of the user id: the artifact directory
// name, so a user id never appears in a path or URL and cannot be guessed.
std::string UserDir(const std::string& user, const std::string& key);

}  // namespace sandrun::storage
