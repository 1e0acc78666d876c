// GET /openapi.json: the OpenAPI 3.1 description of POST /run (DESIGN.md §2). Open WebUI, and
// any other OpenAPI tool client, turns its one operation (`run_code`) into a tool: the
// operation's description becomes the model's tool prompt and the request schema its
// parameters, so both are written for a model to read.
#pragma once

#include <string>

#include "api/http.h"
#include "config/config.h"

namespace sandrun::api {

// The spec as pretty-printed JSON. `config` fills in what differs between servers: the
// configured languages (the enum of `language`) and whether a request may omit the bearer
// token. Returns "" only if the built-in spec text is broken (a bug a test catches).
std::string OpenApiJson(const config::Config& config);

// The HTTP answer for /openapi.json: 200 with the spec for GET and HEAD, 405 otherwise. No
// bearer token is needed: the spec holds nothing secret, and Open WebUI fetches it to verify a
// connection before any token question arises.
HttpResponse OpenApiResponse(const HttpRequest& request, const config::Config& config);

}  // namespace sandrun::api
