// Helpers of the artifact-store suites (artifact_store_test.cc, artifact_expiry_test.cc,
// reverse_proxy_test.cc, browser_test.cc): requests with headers of our choosing, from a
// source address of our choosing, and child processes with a time bound.
#pragma once

#include <rapidjson/document.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "helpers.h"

namespace sandrun::integration {

using Headers = std::multimap<std::string, std::string>;

// A request to the stack's nginx (or to 127.0.0.1:`port` when given) with extra headers,
// sent from `source_ip` when non-empty (any 127.0.0.0/8 address reaches loopback). A
// transport error fails the test.
HttpResponse GetWith(const std::string& path_and_query, const Headers& headers,
                     const std::string& source_ip = "", int port = 0);
HttpResponse PostWith(const std::string& path, const std::string& body, const Headers& headers,
                      const std::string& source_ip = "", int port = 0);

// {"language": "python", "code": code} plus "user" when non-empty.
std::string PythonRequest(const std::string& code, const std::string& user = "");

// POST /run with headers; requires 200 and returns the parsed answer.
rapidjson::Document PostRunWith(const std::string& body, const Headers& headers);

// The entry of doc[list] ("files" or "files_skipped") whose `key` is `value`; nullptr if none.
const rapidjson::Value* FindEntry(const rapidjson::Value& doc, const char* list, const char* key,
                                  const std::string& value);

// Number of entries in doc[list], or -1 when it is missing.
int ListSize(const rapidjson::Value& doc, const char* list);

// Runs argv[0] (searched in PATH) with the environment plus `extra_env`, its stdout and stderr
// into `log_path`, in a process group of its own; kills the group after `timeout_s`.
// Returns the exit status, or -1 when it was killed for taking too long, or -2 when it died by
// a signal.
int RunWithTimeout(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                   const std::string& log_path, int timeout_s);

// The response headers of GET `path_and_query` (to the stack, or to 127.0.0.1:`port`) as
// sent on the wire, names in lower case. Read with curl: cpp-httplib 0.11 percent-decodes
// every header value it receives, which would hide what a Content-Disposition really says.
std::map<std::string, std::string> RawHeaders(const std::string& path_and_query, int port = 0);

// Percent-decodes a URL path (nginx's $uri is the decoded path: what links are signed for).
std::string PercentDecode(const std::string& encoded);

}  // namespace sandrun::integration
