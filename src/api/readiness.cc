// GET /readyz (docs/OPERATIONS.md "Run like a service"): whether a run could start now. Cheap:
// counters and one statvfs(2), no sandbox; /healthz stays the check that the host can sandbox at
// all.
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <string>
#include <vector>

#include "api/service.h"
#include "sys/syscalls.h"
#include "util/text.h"

namespace sandrun::api {

HttpResponse Service::HandleReady() const {
  const std::shared_ptr<const config::Config> live = LiveConfig();
  std::vector<std::string> reasons;
  if (runner_ == nullptr || !health_error_.empty()) {
    reasons.push_back("this host cannot run sandboxes: " + health_error_);
  }
  if (engine_.draining()) reasons.emplace_back("stopping: the daemon is draining (SIGTERM)");
  const run::Admission& admission = engine_.admission();
  const int64_t free_slots = std::max<int64_t>(0, admission.slots() - admission.active());
  const int64_t queue_free = std::max<int64_t>(0, admission.queue_limit() - admission.queued());
  if (free_slots == 0 && queue_free == 0) {
    reasons.push_back("all " + std::to_string(admission.slots()) +
                      " sandboxes are busy and the queue (max_queue " +
                      std::to_string(admission.queue_limit()) + ") is full");
  }
  // Room for one user's whole quota of published files: less, and a run's files may not be
  // saved (file_limit) for reasons no user caused.
  const int64_t min_free_mb = live->user_quota_mb;
  int64_t free_mb = -1;
  if (auto avail = sys::AvailableBytes(config_.artifacts_dir); !avail.ok()) {
    reasons.push_back("artifacts_dir: " + avail.error().message);
  } else {
    free_mb = static_cast<int64_t>(*avail >> 20);
    if (free_mb < min_free_mb) {
      reasons.push_back("artifacts_dir " + config_.artifacts_dir + " has " +
                        std::to_string(free_mb) + " MiB free, less than user_quota_mb (" +
                        std::to_string(min_free_mb) + " MiB)");
    }
  }

  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("ready");
  w.Bool(reasons.empty());
  w.Key("reasons");
  w.StartArray();
  for (const auto& reason : reasons) w.String(util::SanitizeUtf8(reason).c_str());
  w.EndArray();
  w.Key("free_slots");
  w.Int64(free_slots);
  w.Key("queue_free");
  w.Int64(queue_free);
  w.Key("artifacts_free_mb");
  w.Int64(free_mb);
  w.Key("artifacts_min_free_mb");
  w.Int64(min_free_mb);
  w.EndObject();
  HttpResponse r;
  r.body = buffer.GetString();
  if (!reasons.empty()) {
    r.status = 503;
    r.headers["Retry-After"] = "5";
  }
  return r;
}

}  // namespace sandrun::api
