#include "config/reload.h"

namespace sandrun::config {

bool IsLiveKey(const std::string& key) {
  if (key.rfind("limits.", 0) == 0 || key.rfind("ceilings.", 0) == 0) return true;
  if (key == "tokens") return true;  // what tokens_file and bearer_tokens hold
  for (const KeyInfo& info : KeyTable()) {
    if (info.name == key) return info.live;
  }
  return false;  // languages, pool, link_secret
}

ReloadPlan PlanReload(const Config& running, const Config& started, const Config& loaded) {
  ReloadPlan plan;
  plan.next = running;
  CopyLiveKeys(loaded, &plan.next);
  for (auto& key : ChangedKeys(running, loaded)) {
    if (IsLiveKey(key)) plan.applied.push_back(std::move(key));
  }
  for (auto& key : ChangedKeys(started, loaded)) {
    if (!IsLiveKey(key)) plan.needs_restart.push_back(std::move(key));
  }
  return plan;
}

}  // namespace sandrun::config
