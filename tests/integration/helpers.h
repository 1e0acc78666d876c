// Helpers for the integration tests: HTTP requests to the stack (cpp-httplib), JSON bodies and
// answers (RapidJSON), signed links (OpenSSL, independent of src/storage so that the test
// checks the daemon's signing against nginx); the host's processes are in processes.h.
#pragma once

#include <httplib.h>
#include <rapidjson/document.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "processes.h"  // ProcessArgvs, ProcessAlive: a view of the host's processes

namespace sandrun::integration {

struct HttpResponse {
  int status = 0;
  std::string body;
  httplib::Headers headers;

  // The header's value, "" if absent (names are case-insensitive).
  std::string Header(const std::string& name) const;
};

// The answer of a cpp-httplib request; a transport error fails the test naming `what`.
HttpResponse FromResult(const httplib::Result& result, const std::string& what);

// Requests to the stack's nginx. A transport error fails the test (BOOST_REQUIRE).
HttpResponse Get(const std::string& path_and_query);
HttpResponse Post(const std::string& path, const std::string& body,
                  const std::string& content_type = "application/json");
// GET of an absolute URL, which must start with the stack's base URL.
HttpResponse GetUrl(const std::string& url);

// Waits until /healthz counts at least `runs` runs admitted (its "active"): a run started
// from another thread is then in its sandbox. Fails the test after `timeout_s`.
void WaitForActiveRuns(int64_t runs, int timeout_s = 30);
// Waits until the integer `field` of /healthz is at least `at_least` (e.g. "session_waiters":
// requests waiting for a busy session). Fails the test after `timeout_s`.
void WaitForHealthz(const char* field, int64_t at_least, int timeout_s = 30);

// Parses `body` as JSON; a parse error fails the test with the body in the message.
rapidjson::Document ParseJson(const std::string& body);

// POST /run of `body`, `per_client` times from each of `clients` threads at once, one
// connection each (no Boost.Test check runs in the threads): every answer, a transport error
// as status 0 with its name as the body.
std::vector<HttpResponse> PostRunConcurrently(const std::string& body, int clients, int per_client);

// POST /run with `body`; requires HTTP 200 and returns the parsed answer.
rapidjson::Document PostRun(const std::string& body);
// POST /run of a bash run with the probe (tests/probe) uploaded as ./probe, running `command`;
// `extra_members` (JSON object members, e.g. "\"network\": true") join the request.
rapidjson::Document RunWithProbe(const std::string& command, const std::string& extra_members = "");

// A /run request body: {"language":..., "code":..., "limits":{...}} (limits only if given).
std::string RunRequest(const std::string& language, const std::string& code,
                       const std::map<std::string, int64_t>& limits = {});

// Member `key` of `object` as a string; fails the test (and returns "") if it is missing or
// not a string.
std::string Str(const rapidjson::Value& object, const char* key);
// Member `key` of `object` as an integer; fails the test (and returns -1) if missing.
int64_t Int(const rapidjson::Value& object, const char* key);

// The error object of a service error answer {"error":{"code","message","field"}}: code,
// message and field ("" when absent or null).
struct ServiceError {
  std::string code, message, field;
};
ServiceError ParseServiceError(const std::string& body);

// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(const std::string& data);

// nginx secure_link_md5 "$secure_link_expires$uri <secret>": base64url without padding of
// MD5(expires + uri + " " + secret).
std::string SecureLinkMd5(const std::string& uri, int64_t expires, const std::string& secret);

// A download link split into its parts.
struct Link {
  std::string path;  // "/files/<user-dir>/<run-id>/<name>", as sent (percent-encoded)
  std::string md5;
  int64_t expires = 0;
};
// Splits an absolute link of the stack; fails the test if it has no md5 or expires.
Link ParseLink(const std::string& url);
std::string LinkPathAndQuery(const Link& link);

// Seconds since the epoch.
int64_t NowEpochS();

// Whole content of a file, "" if it cannot be read.
std::string ReadFile(const std::string& path);

// A JSON string literal of `text` (quotes and escapes by RapidJSON), for building bodies.
std::string Q(const std::string& text);

// Line `n` (from 0) of `s`, without its newline; "" past the end.
std::string Line(const std::string& s, int n);

}  // namespace sandrun::integration
