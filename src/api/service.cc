#include "api/service.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <signal.h>

#include <algorithm>
#include <initializer_list>
#include <sstream>
#include <utility>

#include "api/access.h"
#include "api/errors.h"
#include "api/openapi.h"
#include "api/run_codec.h"
#include "storage/artifact_store.h"
#include "storage/export.h"
#include "storage/signed_link.h"
#include "sys/syscalls.h"
#include "util/text.h"

namespace sandrun::api {
namespace {

constexpr int64_t kDurationBucketsMs[] = {50,   100,   250,   500,   1000,  2500,
                                          5000, 10000, 30000, 60000, 300000};

}  // namespace

Service::Service(const config::Config& config, const sandbox::SandboxRunner* runner,
                 std::string health_error, const run::RunTmpfs& run_tmpfs)
    : config_(config),
      runner_(runner),
      health_error_(std::move(health_error)),
      engine_(config, runner, run_tmpfs),
      duration_buckets_(std::size(kDurationBucketsMs), 0) {}

std::string Service::SelfTest() {
  if (runner_ == nullptr) return health_error_;
  HttpRequest request;
  request.method = "POST";
  request.path = "/run";
  request.body = R"({"language":"bash","code":"echo sandrun-self-test","user":"self-test"})";
  request.request_id = "self-test";
  request.headers["content-type"] = "application/json";
  HttpResponse response = HandleRun(request, /*trusted=*/true);
  if (response.status != 200 || response.body.find("\"status\":\"ok\"") == std::string::npos ||
      response.body.find("sandrun-self-test") == std::string::npos) {
    health_error_ = "sandbox self-test failed: " + response.body;
  }
  return health_error_;
}

LogFields& Service::Notes() {
  thread_local LogFields notes;
  return notes;
}

HttpResponse Service::Handle(const HttpRequest& request) {
  Notes() = {};
  HttpResponse response = Route(request);
  response.log = std::move(Notes());
  return response;
}

HttpResponse Service::Route(const HttpRequest& request) {
  try {
    if (request.path == "/run") {
      if (request.method != "POST") {
        HttpResponse r = ErrorResponse(ApiCode::kMethodNotAllowed, "use POST /run");
        r.headers["Allow"] = "POST";
        return r;
      }
      if (WantsStream(request)) return HandleStreamedRun(request);
      return HandleRun(request);
    }
    if (request.path == "/healthz" || request.path == "/readyz" || request.path == "/metrics") {
      if (auto refused = CheckHealthAccess(request.remote_addr, request.Header("authorization"),
                                           *LiveConfig())) {
        return ErrorResponse(*refused);
      }
    }
    if (request.path == "/healthz") return HandleHealth();
    if (request.path == "/readyz") return HandleReady();
    if (request.path == "/metrics") return HandleMetrics();
    if (request.path == "/openapi.json") return OpenApiResponse(request, *LiveConfig());
    return ErrorResponse(ApiCode::kNotFound, "no such endpoint: " + request.path);
  } catch (const std::exception& e) {
    return ErrorResponse(ApiCode::kInternal, "request " + request.request_id + ": " + e.what());
  } catch (...) {
    return ErrorResponse(ApiCode::kInternal, "request " + request.request_id + " failed");
  }
}

std::string Service::PublicBaseUrl(const HttpRequest& request) const {
  if (!config_.public_url.empty()) return config_.public_url;
  std::string proto = "http", host = request.Header("host"), prefix;
  if (config_.trust_forwarded_headers) {
    // nginx sets all three itself: its own scheme and host, or a trusted proxy's (realip).
    if (!request.Header("x-forwarded-proto").empty()) proto = request.Header("x-forwarded-proto");
    if (!request.Header("x-forwarded-host").empty()) host = request.Header("x-forwarded-host");
    prefix = request.Header("x-forwarded-prefix");
  }
  return storage::LinkBaseUrl(proto, host, prefix);
}

namespace {

// The counts /healthz gives of a pool (the warm pool's languages, the network namespaces):
// "hits", "misses", "failures"[, "last_error"], into the object being written.
void WritePoolCounts(rapidjson::Writer<rapidjson::StringBuffer>& w, int64_t hits, int64_t misses,
                     int64_t failures, const std::string& last_error) {
  w.Key("hits");
  w.Int64(hits);
  w.Key("misses");
  w.Int64(misses);
  w.Key("failures");
  w.Int64(failures);
  if (!last_error.empty()) {
    w.Key("last_error");
    w.String(util::SanitizeUtf8(last_error).c_str());
  }
}

// The per-sandbox socket cap (socket_cap.h), for /healthz: "on", or "off: <why>" (then
// listed among the weaker limits too, or the daemon did not start).
std::string SocketCapState(const sandbox::CgroupManager* cgroups) {
  if (cgroups == nullptr) return "off: no cgroups";
  const std::string error = cgroups->socket_cap_error();
  return error.empty() ? "on" : "off: " + error;
}

// Members `name: value` of the object being written, in order.
void WriteInts(rapidjson::Writer<rapidjson::StringBuffer>& w,
               std::initializer_list<std::pair<const char*, int64_t>> members) {
  for (const auto& [name, value] : members) {
    w.Key(name);
    w.Int64(value);
  }
}

// /healthz "pool", "kernel_pool", "zygote", "kernel_zygote" and "net_namespaces": what the
// pools and zygotes hold and how they did.
void WritePools(rapidjson::Writer<rapidjson::StringBuffer>& w, const run::Engine& engine,
                const sandbox::SandboxRunner* runner) {
  // The warm pool per language (warm_pool.h): {"python": {"size", "ready", "refilling",
  // "deferred", "hits", "misses", "failures"[, "last_error"]}}; {} without one.
  w.Key("pool");
  w.StartObject();
  for (const auto& [language, stats] : engine.pool().Stats()) {
    w.Key(language.c_str());
    w.StartObject();
    WriteInts(w, {{"size", stats.size}, {"ready", stats.ready}});
    w.Key("refilling");
    w.Bool(stats.refilling);
    w.Key("deferred");
    w.Bool(stats.deferred);
    WritePoolCounts(w, stats.hits, stats.misses, stats.failures, stats.last_error);
    w.EndObject();
  }
  w.EndObject();
  // The kernel pool (kernel/kernel_pool.h): {"size", "ready", "active", "refilling",
  // "deferred", "hits", "misses", "failures"[, "last_error"]}.
  const kernel::KernelPoolStats kp = engine.kernels().pool_stats();
  w.Key("kernel_pool");
  w.StartObject();
  WriteInts(w, {{"size", kp.size}, {"ready", kp.ready}});
  w.Key("active");
  w.Bool(kp.active);
  w.Key("refilling");
  w.Bool(kp.refilling);
  w.Key("deferred");
  w.Bool(kp.deferred);
  WritePoolCounts(w, kp.hits, kp.misses, kp.failures, kp.last_error);
  w.EndObject();
  // The network namespaces made ahead (sandbox/net_namespace_pool.h), the same counts.
  const sandbox::NetNamespaceStats nets =
      runner != nullptr ? runner->net_namespace_stats() : sandbox::NetNamespaceStats{};
  // The zygotes (sandbox/zygote.h): {"servers", "served", "failed"}, zeros when off or dead
  // at the start (runs then start cold).
  for (const auto& [key, kind] : {std::pair{"zygote", sandbox::ZygoteKind::kRun},
                                  std::pair{"kernel_zygote", sandbox::ZygoteKind::kKernel}}) {
    const sandbox::ZygoteStats z =
        runner != nullptr ? runner->zygote_stats(kind) : sandbox::ZygoteStats{};
    w.Key(key);
    w.StartObject();
    WriteInts(w, {{"servers", z.servers}, {"served", z.served}, {"failed", z.failed}});
    w.EndObject();
  }
  w.Key("net_namespaces");
  w.StartObject();
  WritePoolCounts(w, nets.hits, nets.misses, nets.failures, nets.last_error);
  // Given back after runs: kept for their user, handed out again, let go; kept now, in checks.
  WriteInts(w, {{"recycled", nets.recycled},
                {"reused", nets.reused},
                {"discarded", nets.discarded},
                {"kept", nets.kept},
                {"checking", nets.checking}});
  w.EndObject();
}

}  // namespace

HttpResponse Service::HandleHealth() const {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  const std::string cgroups =
      runner_ && runner_->cgroups() ? runner_->cgroups()->version() : "none";
  w.StartObject();
  w.Key("status");
  w.String(!health_error_.empty() ? "unavailable" : engine_.draining() ? "stopping" : "ok");
  if (!health_error_.empty()) {
    // The same error shape as every service error, naming the failed check or step.
    w.Key("error");
    w.StartObject();
    w.Key("code");
    w.String("unhealthy");
    w.Key("message");
    w.String(util::SanitizeUtf8(health_error_).c_str());
    w.EndObject();
  }
  w.Key("cgroups");
  w.String(cgroups.c_str());
  w.Key("socket_cap");
  w.String(util::SanitizeUtf8(SocketCapState(runner_ ? runner_->cgroups() : nullptr)).c_str());
  w.Key("weaker_limits");
  w.StartArray();
  for (const auto& line : weaker_limits_) w.String(line.c_str());
  w.EndArray();
  w.Key("active");
  w.Int64(engine_.admission().active());
  w.Key("queued");
  w.Int64(engine_.admission().queued());
  // Requests waiting now for a busy session (WaiterGate; session_max_waiters_total at most).
  w.Key("session_waiters");
  w.Int64(engine_.session_waiters());
  WritePools(w, engine_, runner_);
  w.EndObject();
  HttpResponse r;
  r.status = health_error_.empty() && !engine_.draining() ? 200 : 503;
  r.body = buffer.GetString();
  return r;
}

void Service::Count(RunStatus status, int64_t wall_ms) {
  CountName(RunStatusName(status), wall_ms);
}

void Service::CountName(const std::string& status, int64_t wall_ms) {
  std::lock_guard lock(metrics_mu_);
  ++runs_by_status_[status];
  for (size_t i = 0; i < std::size(kDurationBucketsMs); ++i) {
    if (wall_ms <= kDurationBucketsMs[i]) ++duration_buckets_[i];
  }
  ++duration_count_;
  duration_sum_s_ += static_cast<double>(wall_ms) / 1000.0;
}

HttpResponse Service::HandleMetrics() const {
  std::ostringstream out;
  std::lock_guard lock(metrics_mu_);
  out << "# HELP sandrun_runs_total Runs finished, by status.\n"
      << "# TYPE sandrun_runs_total counter\n";
  for (const auto& [status, n] : runs_by_status_) {
    out << "sandrun_runs_total{status=\"" << status << "\"} " << n << "\n";
  }
  out << "# HELP sandrun_run_duration_seconds Wall time of runs.\n"
      << "# TYPE sandrun_run_duration_seconds histogram\n";
  for (size_t i = 0; i < std::size(kDurationBucketsMs); ++i) {
    out << "sandrun_run_duration_seconds_bucket{le=\"" << kDurationBucketsMs[i] / 1000.0 << "\"} "
        << duration_buckets_[i] << "\n";
  }
  out << "sandrun_run_duration_seconds_bucket{le=\"+Inf\"} " << duration_count_ << "\n"
      << "sandrun_run_duration_seconds_sum " << duration_sum_s_ << "\n"
      << "sandrun_run_duration_seconds_count " << duration_count_ << "\n"
      << "# HELP sandrun_sandboxes_active Sandboxes running now.\n"
      << "# TYPE sandrun_sandboxes_active gauge\n"
      << "sandrun_sandboxes_active " << engine_.admission().active() << "\n"
      << "# HELP sandrun_artifact_files Files in the artifact store (at the last janitor sweep).\n"
      << "# TYPE sandrun_artifact_files gauge\n"
      << "sandrun_artifact_files " << artifact_files_.load() << "\n"
      << "# HELP sandrun_artifact_bytes Bytes in the artifact store (at the last janitor sweep).\n"
      << "# TYPE sandrun_artifact_bytes gauge\n"
      << "sandrun_artifact_bytes " << artifact_bytes_.load() << "\n"
      << "# HELP sandrun_sandboxes_queued Requests waiting for a sandbox.\n"
      << "# TYPE sandrun_sandboxes_queued gauge\n"
      << "sandrun_sandboxes_queued " << engine_.admission().queued() << "\n";
  const auto pool = engine_.pool().Stats();
  auto per_language = [&out, &pool](const char* name, const char* type, const char* help,
                                    auto field) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
    for (const auto& [language, stats] : pool) {
      out << name << "{language=\"" << language << "\"} " << field(stats) << "\n";
    }
  };
  per_language("sandrun_pool_ready", "gauge", "Warm sandboxes waiting for a run.",
               [](const run::WarmPoolStats& s) { return s.ready; });
  per_language("sandrun_pool_size", "gauge", "Warm sandboxes configured (pool).",
               [](const run::WarmPoolStats& s) { return s.size; });
  per_language("sandrun_pool_refilling", "gauge", "1 while a warm sandbox is being started.",
               [](const run::WarmPoolStats& s) { return s.refilling ? 1 : 0; });
  per_language("sandrun_pool_deferred", "gauge",
               "1 while a due refill waits for the runs in flight to let it start.",
               [](const run::WarmPoolStats& s) { return s.deferred ? 1 : 0; });
  per_language("sandrun_pool_hits_total", "counter", "Runs served by a warm sandbox.",
               [](const run::WarmPoolStats& s) { return s.hits; });
  per_language("sandrun_pool_misses_total", "counter",
               "Runs that fit the pool but found no warm sandbox ready (ran cold).",
               [](const run::WarmPoolStats& s) { return s.misses; });
  per_language("sandrun_pool_failures_total", "counter",
               "Warm sandboxes that failed to start or ended while waiting.",
               [](const run::WarmPoolStats& s) { return s.failures; });
  const sandbox::NetNamespaceStats nets =
      runner_ != nullptr ? runner_->net_namespace_stats() : sandbox::NetNamespaceStats{};
  out << "# HELP sandrun_netns_ready_hits_total Runs without network that started in a network "
         "namespace made ahead.\n# TYPE sandrun_netns_ready_hits_total counter\n"
      << "sandrun_netns_ready_hits_total " << nets.hits << "\n"
      << "# HELP sandrun_netns_ready_misses_total Runs without network that found none ready and "
         "made their own.\n# TYPE sandrun_netns_ready_misses_total counter\n"
      << "sandrun_netns_ready_misses_total " << nets.misses << "\n"
      << "# HELP sandrun_netns_ready_failures_total Network namespaces that could not be made "
         "ahead (/healthz: net_namespaces.last_error).\n# TYPE sandrun_netns_ready_failures_total "
         "counter\n"
      << "sandrun_netns_ready_failures_total " << nets.failures << "\n"
      << "# HELP sandrun_netns_reused_total Runs without network that started in the namespace "
         "an earlier run of the same user left as new.\n# TYPE sandrun_netns_reused_total "
         "counter\n"
      << "sandrun_netns_reused_total " << nets.reused << "\n"
      << "# HELP sandrun_netns_discarded_total Namespaces given back after a run and let go: the "
         "run left sockets or traffic in them.\n# TYPE sandrun_netns_discarded_total counter\n"
      << "sandrun_netns_discarded_total " << nets.discarded << "\n";
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4";
  r.body = out.str();
  return r;
}

}  // namespace sandrun::api
