#include "config/reload.h"

#include <algorithm>

namespace sandrun::config {

bool IsLiveKey(const std::string& key) {
  static const char* const kLive[] = {"user_quota_files", "user_quota_mb", "tokens",
                                      "tokens_file",      "bearer_tokens", "allow_anonymous",
                                      "allowed_origins",  "link_ttl_s",    "health_allow"};
  if (key.rfind("limits.", 0) == 0 || key.rfind("ceilings.", 0) == 0) return true;
  return std::find(std::begin(kLive), std::end(kLive), key) != std::end(kLive);
}

ReloadPlan PlanReload(const Config& running, const Config& started, const Config& loaded) {
  ReloadPlan plan;
  plan.next = running;
  Config& next = plan.next;
  next.limits = loaded.limits;
  next.ceilings = loaded.ceilings;
  next.user_quota_files = loaded.user_quota_files;
  next.user_quota_mb = loaded.user_quota_mb;
  next.tokens_file = loaded.tokens_file;
  next.bearer_tokens = loaded.bearer_tokens;
  next.tokens = loaded.tokens;
  next.allow_anonymous = loaded.allow_anonymous;
  next.allowed_origins = loaded.allowed_origins;
  next.origins = loaded.origins;
  next.link_ttl_s = loaded.link_ttl_s;
  next.health_allow = loaded.health_allow;
  next.health_allow_ranges = loaded.health_allow_ranges;
  for (auto& key : ChangedKeys(running, loaded)) {
    if (IsLiveKey(key)) plan.applied.push_back(std::move(key));
  }
  for (auto& key : ChangedKeys(started, loaded)) {
    if (!IsLiveKey(key)) plan.needs_restart.push_back(std::move(key));
  }
  return plan;
}

}  // namespace sandrun::config
