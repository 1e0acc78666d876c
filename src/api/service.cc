#include "api/service.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <signal.h>

#include <sstream>

#include "api/run_codec.h"
#include "storage/artifact_store.h"
#include "storage/export.h"
#include "sys/syscalls.h"
#include "util/text.h"

namespace sandrun::api {
namespace {

constexpr int64_t kDurationBucketsMs[] = {50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000,
                                          60000, 300000};
constexpr char kProgramDir[] = "/home/user/.sandrun";

std::string JsonString(const std::string& raw) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  std::string clean = util::SanitizeUtf8(raw);
  w.String(clean.data(), static_cast<rapidjson::SizeType>(clean.size()));
  return buffer.GetString();
}

// Directory of one run on the host: a size-limited tmpfs workspace (so hard links to
// outside inodes fail with EXDEV and a disk-filling loop hits ENOSPC, not the host's disk)
// and an empty directory for the new root. Removed whole on destruction.
class RunDir {
 public:
  explicit RunDir(std::string path) : path_(std::move(path)) {}
  ~RunDir() {
    if (mounted_) (void)sys::Unmount(workspace());
    (void)sys::RemoveTree(path_);
  }
  Status Create(uint64_t disk_bytes, uid_t uid, gid_t gid) {
    Status s = sys::MakeDirs(workspace(), 0755);
    if (s.ok()) s = sys::MakeDirs(root(), 0755);
    if (s.ok()) s = sys::MountTmpfs(workspace(), disk_bytes, uid, gid, 0755);
    mounted_ = s.ok();
    return s;
  }
  std::string workspace() const { return path_ + "/ws"; }
  std::string root() const { return path_ + "/root"; }

 private:
  std::string path_;
  bool mounted_ = false;
};

std::vector<std::string> SandboxEnv(const config::Config& config) {
  std::vector<std::string> env = {
      "HOME=/home/user",
      "USER=user",
      "LOGNAME=user",
      "LANG=C.UTF-8",
      "LC_ALL=C.UTF-8",
      "PATH=/home/user/.local/bin:/usr/local/bin:/usr/bin:/bin",
      "PYTHONUNBUFFERED=1",
      "PYTHONIOENCODING=utf-8",
      "PYTHONDONTWRITEBYTECODE=1",
      "MPLBACKEND=Agg",
      "MPLCONFIGDIR=/tmp/matplotlib",
      "XDG_CACHE_HOME=/home/user/.cache",
      "TMPDIR=/tmp",
      // pip as users type it: user-site installs, Debian's PEP 668 refusal lifted inside
      // the sandbox only, and a fast failure without network (no retries, short timeout).
      "PIP_USER=1",
      "PIP_BREAK_SYSTEM_PACKAGES=1",
      "PIP_DISABLE_PIP_VERSION_CHECK=1",
      "PIP_NO_INPUT=1",
      "PIP_RETRIES=0",
      "PIP_TIMEOUT=3",
      "PIP_CACHE_DIR=/home/user/.cache/pip",
  };
  if (!config.timezone.empty()) env.push_back("TZ=" + config.timezone);
  return env;
}

std::string StatusOf(const sandbox::SandboxResult& r) {
  using sandbox::RunOutcome;
  switch (r.outcome) {
    case RunOutcome::kExited: return r.exit_code == 0 ? "ok" : "error";
    case RunOutcome::kSignaled: return "killed";
    case RunOutcome::kWallTimeout:
    case RunOutcome::kCpuTimeout: return "timeout";
    case RunOutcome::kMemoryLimit: return "memory_limit";
    case RunOutcome::kOutputLimit: return "output_limit";
  }
  return "error";
}

// A line appended to stderr saying which limit stopped the run, so neither the user nor the
// model has to guess from a bare SIGKILL.
std::string LimitNote(const sandbox::SandboxResult& r, const config::Limits& limits) {
  using sandbox::RunOutcome;
  switch (r.outcome) {
    case RunOutcome::kWallTimeout:
      return "sandrun: stopped: wall-clock time limit of " + std::to_string(limits.wall_time_s) +
             " s reached";
    case RunOutcome::kCpuTimeout:
      return "sandrun: stopped: CPU time limit of " + std::to_string(limits.cpu_time_s) +
             " s reached";
    case RunOutcome::kMemoryLimit:
      return "sandrun: stopped: memory limit of " + std::to_string(limits.memory_mb) +
             " MiB reached";
    case RunOutcome::kOutputLimit:
      return "sandrun: stopped: output limit exceeded (" + std::to_string(limits.output_bytes) +
             " bytes of stdout + stderr)";
    default:
      return "";
  }
}

}  // namespace

HttpResponse ErrorResponse(int status, const std::string& code, const std::string& message,
                           const std::string& field) {
  HttpResponse response;
  response.status = status;
  response.body = "{\"error\":{\"code\":" + JsonString(code) +
                  ",\"message\":" + JsonString(message) +
                  (field.empty() ? "" : ",\"field\":" + JsonString(field)) + "}}";
  return response;
}

Service::Service(const config::Config& config, const sandbox::Launcher* launcher,
                 std::string health_error)
    : config_(config),
      launcher_(launcher),
      health_error_(std::move(health_error)),
      admission_(config.max_concurrent_runs, config.max_queue,
                 std::chrono::seconds(config.queue_wait_s)),
      duration_buckets_(std::size(kDurationBucketsMs), 0) {}

std::string Service::SelfTest() {
  if (launcher_ == nullptr) return health_error_;
  HttpRequest request;
  request.method = "POST";
  request.path = "/run";
  request.body = R"({"language":"bash","code":"echo sandrun-self-test","user":"self-test"})";
  request.request_id = "self-test";
  HttpResponse response = HandleRun(request, /*trusted=*/true);
  if (response.status != 200 || response.body.find("\"status\":\"ok\"") == std::string::npos ||
      response.body.find("sandrun-self-test") == std::string::npos) {
    health_error_ = "sandbox self-test failed: " + response.body;
  }
  return health_error_;
}

HttpResponse Service::Handle(const HttpRequest& request) {
  try {
    if (request.path == "/run") {
      if (request.method != "POST") {
        HttpResponse r = ErrorResponse(405, "method_not_allowed", "use POST /run");
        r.headers["Allow"] = "POST";
        return r;
      }
      return HandleRun(request);
    }
    if (request.path == "/healthz") return HandleHealth();
    if (request.path == "/metrics") return HandleMetrics();
    return ErrorResponse(404, "not_found", "no such endpoint: " + request.path);
  } catch (const std::exception& e) {
    return ErrorResponse(500, "internal", "request " + request.request_id + ": " + e.what());
  } catch (...) {
    return ErrorResponse(500, "internal", "request " + request.request_id + " failed");
  }
}

bool Service::Authorized(const HttpRequest& request) const {
  if (config_.allow_anonymous) return true;
  const std::string header = request.Header("authorization");
  const std::string prefix = "Bearer ";
  if (header.compare(0, prefix.size(), prefix) != 0) return false;
  // Compare digests in constant time so neither content nor length leaks through timing.
  unsigned char given[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(header.data() + prefix.size()),
         header.size() - prefix.size(), given);
  bool match = false;
  for (const auto& token : config_.tokens) {
    unsigned char want[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), want);
    match |= CRYPTO_memcmp(given, want, sizeof want) == 0;
  }
  return match;
}

std::string Service::PublicBaseUrl(const HttpRequest& request) const {
  if (!config_.public_url.empty()) return config_.public_url;
  std::string proto = "http", host = request.Header("host");
  if (config_.trust_forwarded_headers) {
    if (!request.Header("x-forwarded-proto").empty()) proto = request.Header("x-forwarded-proto");
    if (!request.Header("x-forwarded-host").empty()) host = request.Header("x-forwarded-host");
  }
  if (host.empty()) host = "127.0.0.1";
  return proto + "://" + host;
}

HttpResponse Service::HandleRun(const HttpRequest& request, bool trusted) {
  if (!trusted && !Authorized(request)) {
    HttpResponse r = ErrorResponse(401, "unauthorized",
                                   "missing or wrong bearer token (Authorization: Bearer <token>)");
    r.headers["WWW-Authenticate"] = "Bearer";
    return r;
  }
  if (launcher_ == nullptr || !health_error_.empty()) {
    return ErrorResponse(503, "unavailable", "this host cannot run sandboxes: " + health_error_);
  }
  RunRequest run;
  if (auto err = DecodeRunRequest(request.body, request.Header("x-sandrun-user"), config_, &run)) {
    return ErrorResponse(err->status, err->code, err->message, err->field);
  }
  Admission::Ticket ticket = admission_.Acquire();
  if (!ticket.admitted()) {
    HttpResponse r = ErrorResponse(503, "busy", "all sandboxes are busy; retry shortly");
    r.headers["Retry-After"] = "5";
    return r;
  }

  const std::string id = util::RandomHex(16);
  const config::Limits& limits = run.limits;
  RunDir dir(config_.runs_dir + "/" + id);
  if (Status s = dir.Create(static_cast<uint64_t>(limits.disk_mb) << 20,
                            static_cast<uid_t>(config_.sandbox_uid),
                            static_cast<gid_t>(config_.sandbox_gid));
      !s.ok()) {
    return ErrorResponse(500, "sandbox_error", "run " + id + ": " + s.error().message);
  }
  const std::string program_dir = dir.workspace() + "/.sandrun";
  const std::string program_path = std::string(kProgramDir) + "/" + run.language->file_name;
  if (Status s = sys::MakeDirs(program_dir, 0755); !s.ok()) {
    return ErrorResponse(500, "sandbox_error", "run " + id + ": " + s.error().message);
  }
  if (Status s = sys::WriteFile(program_dir + "/" + run.language->file_name, run.code, 0644);
      !s.ok()) {
    return ErrorResponse(500, "sandbox_error", "run " + id + ": " + s.error().message);
  }

  sandbox::SandboxSpec spec;
  for (const auto& arg : run.language->argv) spec.argv.push_back(arg == "{file}" ? program_path : arg);
  spec.env = SandboxEnv(config_);
  spec.workspace_dir = dir.workspace();
  spec.root_dir = dir.root();
  spec.stdin_data = run.stdin_data;
  spec.host_uid = static_cast<uid_t>(config_.sandbox_uid);
  spec.host_gid = static_cast<gid_t>(config_.sandbox_gid);
  spec.run_id = id;
  spec.limits.wall_time_ms = limits.wall_time_s * 1000;
  spec.limits.cpu_time_s = limits.cpu_time_s;
  spec.limits.memory_bytes = static_cast<uint64_t>(limits.memory_mb) << 20;
  spec.limits.processes = limits.processes;
  spec.limits.output_bytes = static_cast<uint64_t>(limits.output_bytes);
  spec.limits.file_size_bytes = static_cast<uint64_t>(limits.file_size_mb) << 20;
  spec.limits.disk_bytes = static_cast<uint64_t>(limits.disk_mb) << 20;

  auto result = launcher_->Run(spec);
  if (!result.ok()) {
    Count("sandbox_error", 0);
    HttpResponse r = ErrorResponse(500, "sandbox_error", "run " + id + ": " + result.error().message);
    return r;
  }

  RunResponse response;
  response.id = id;
  response.status = StatusOf(*result);
  if (result->exit_code >= 0) response.exit_code = result->exit_code;
  if (result->signal > 0) response.signal = result->signal;
  response.stdout_stream = {result->stdout_text, result->stdout_truncated};
  response.stderr_stream = {result->stderr_text, result->stderr_truncated};
  if (std::string note = LimitNote(*result, limits); !note.empty()) {
    std::string& err = response.stderr_stream.text;
    if (!err.empty() && err.back() != '\n') err.push_back('\n');
    err += note + "\n";
  }
  if (result->process_limit_hits > 0) {
    // A run that hit its process limit did not do what it tried (a fork bomb, a pool too
    // big): say so, and never call it "ok" even if the main program exited 0.
    if (response.status == "ok") response.status = "error";
    std::string& err = response.stderr_stream.text;
    if (!err.empty() && err.back() != '\n') err.push_back('\n');
    err += "sandrun: the run reached its process limit of " + std::to_string(limits.processes) +
           " (the kernel refused " + std::to_string(result->process_limit_hits) + " forks)\n";
  }
  response.wall_ms = result->wall_ms;
  response.cpu_ms = result->cpu_ms;
  response.max_rss_kb = result->max_rss_kb;
  response.limits = limits;

  storage::ExportOptions export_options;
  export_options.max_files = static_cast<int>(limits.max_files);
  // A file as large as RLIMIT_FSIZE was most likely cut short by it: treat as too large.
  export_options.max_file_bytes = (static_cast<uint64_t>(limits.file_size_mb) << 20) - 1;
  auto walk = storage::WalkWorkspace(dir.workspace(), export_options);
  if (walk.ok()) {
    for (auto& skipped : walk->skipped) {
      // .sandrun holds the program file we wrote: ours, not the user's; never listed.
      if (skipped.path != ".sandrun") response.files_skipped.push_back(std::move(skipped));
    }
    storage::PublishOptions publish;
    publish.artifacts_root = config_.artifacts_dir;
    publish.public_base_url = PublicBaseUrl(request);
    publish.link_secret = config_.link_secret;
    publish.user_dir_key = config_.link_secret + ":user-dir";
    publish.link_ttl_s = config_.link_ttl_s;
    auto published = storage::Publish(dir.workspace(), walk->files, run.user, id, publish);
    if (published.ok()) {
      response.files = std::move(published->files);
      for (auto& s : published->skipped) response.files_skipped.push_back(std::move(s));
    } else {
      response.status = "file_limit";
      response.stderr_stream.text += "sandrun: generated files could not be saved: " +
                                     published.error().message + "\n";
    }
  } else {
    response.stderr_stream.text +=
        "sandrun: generated files could not be listed: " + walk.error().message + "\n";
  }
  Count(response.status, response.wall_ms);
  HttpResponse http;
  http.body = EncodeRunResponse(response);
  return http;
}

HttpResponse Service::HandleHealth() const {
  HttpResponse r;
  std::string cgroups = launcher_ && launcher_->cgroups() ? launcher_->cgroups()->version() : "none";
  if (!health_error_.empty()) {
    r = ErrorResponse(503, "unhealthy", health_error_);
    return r;
  }
  r.body = "{\"status\":\"ok\",\"cgroups\":" + JsonString(cgroups) +
           ",\"active\":" + std::to_string(admission_.active()) +
           ",\"queued\":" + std::to_string(admission_.queued()) + "}";
  return r;
}

void Service::Count(const std::string& status, int64_t wall_ms) {
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
    out << "sandrun_run_duration_seconds_bucket{le=\"" << kDurationBucketsMs[i] / 1000.0
        << "\"} " << duration_buckets_[i] << "\n";
  }
  out << "sandrun_run_duration_seconds_bucket{le=\"+Inf\"} " << duration_count_ << "\n"
      << "sandrun_run_duration_seconds_sum " << duration_sum_s_ << "\n"
      << "sandrun_run_duration_seconds_count " << duration_count_ << "\n"
      << "# HELP sandrun_sandboxes_active Sandboxes running now.\n"
      << "# TYPE sandrun_sandboxes_active gauge\n"
      << "sandrun_sandboxes_active " << admission_.active() << "\n"
      << "# HELP sandrun_sandboxes_queued Requests waiting for a sandbox.\n"
      << "# TYPE sandrun_sandboxes_queued gauge\n"
      << "sandrun_sandboxes_queued " << admission_.queued() << "\n";
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4";
  r.body = out.str();
  return r;
}

}  // namespace sandrun::api
