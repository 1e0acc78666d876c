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

// Keyed hash (HMAC-SHA256, hex, first 32 chars) of the user id: the artifact directory
// name, so a user id never appears in a path or URL and cannot be guessed.
std::string UserDir(const std::string& user, const std::string& key);


}  // namespace sandrun::storage
