// POST /run at the HTTP edge: access (origin, token, rate, content type), the body decoded
// into the engine's request (run_codec.h), the run engine (run/engine.h), and its end as the
// answer: the response encoded, or the refusal as an API error (errors.cc).
#include "api/access.h"
#include "api/errors.h"
#include "api/run_codec.h"
#include "api/service.h"
#include "api/session_continuity.h"
#include "util/phases.h"

namespace sandrun::api {
namespace {

HttpResponse Refusal(const ApiError& err) { return ErrorResponse(err); }

// 503 for runs that arrive while the daemon stops (SIGTERM): the runs in flight finish.
HttpResponse StoppingResponse() {
  HttpResponse r = ErrorResponse(ApiCode::kStopping, "sandrun is stopping; retry shortly");
  r.headers["Retry-After"] = "5";
  return r;
}

}  // namespace

std::optional<HttpResponse> Service::AcceptRun(const HttpRequest& request, bool trusted,
                                               const config::Config& live, RunRequest* run,
                                               bool* session_seen) const {
  // A web page's request first: whatever else it carries, its origin must be allowed.
  if (auto err = CheckOrigin(request.Header("origin"), live.origins)) return Refusal(*err);
  const Caller caller = Authenticate(request.Header("authorization"), live);
  if (!trusted && !caller.authenticated) {
    HttpResponse r = ErrorResponse(ApiCode::kUnauthorized,
                                   "missing or wrong bearer token (Authorization: Bearer <token>)");
    r.headers["WWW-Authenticate"] = "Bearer";
    return r;
  }
  // Before any other work: the user's requests beyond their rate cost nothing more.
  if (!rate_limiter_.Allow(RateKey(caller, request.Header("x-sandrun-user")))) {
    HttpResponse r = ErrorResponse(ApiCode::kRateLimited,
                                   "too many requests for this user (10 a second, 20 more at "
                                   "once); retry later");
    r.headers["Retry-After"] = "1";
    return r;
  }
  if (auto err = CheckContentType(request.Header("content-type"))) return Refusal(*err);
  if (runner_ == nullptr || !health_error_.empty()) {
    return ErrorResponse(ApiCode::kUnavailable, "this host cannot run sandboxes: " + health_error_);
  }
  if (engine_.draining()) return StoppingResponse();
  auto decoded = DecodeRunRequest(request.body, request.Header("x-sandrun-user"),
                                  request.Header("x-sandrun-session"), live);
  if (!decoded.ok()) return Refusal(decoded.error());
  *run = std::move(*decoded);
  if (auto err = ApplyTokenBinding(caller, run)) return Refusal(*err);
  if (auto err = DecodeSessionSeen(request.Header("x-sandrun-session-seen"), session_seen)) {
    return Refusal(*err);
  }
  return std::nullopt;
}

HttpResponse Service::HandleRun(const HttpRequest& request, bool trusted, run::EventSink* events) {
  // The live keys (tokens, limits, quotas) as of now, for the whole request (SIGHUP).
  const std::shared_ptr<const config::Config> live = LiveConfig();
  RunRequest run;
  bool session_seen = false;
  if (auto refused = AcceptRun(request, trusted, *live, &run, &session_seen)) return *refused;
  Notes().user = run.user;
  util::StampPhase("decoded");
  run.events = events;
  run.public_base_url = PublicBaseUrl(request);
  run::RunEnd end = engine_.Run(std::move(run), *live, session_seen);
  Notes().queue_ms = end.queue_ms;
  if (end.sandbox_error) CountSandboxError();
  if (end.refused) return ErrorResponse(*end.refused);
  HttpResponse http;
  if (end.finished) {
    Count(end.response.status, end.response.wall_ms);
    Notes().run_status = RunStatusName(end.response.status);
    Notes().run_ms = end.response.wall_ms;
  }
  http.body = EncodeRunResponse(end.response);
  // The run's tmpfs and cgroup (or its kernel) go after the response is sent.
  if (end.finished) util::StampPhase("encoded");
  http.after_send = std::move(end.after_send);
  return http;
}

}  // namespace sandrun::api
