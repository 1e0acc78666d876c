#include "api/config_reload.h"

#include <memory>

#include "config/reload.h"
#include "util/json_log.h"

namespace sandrun::api {

bool ReloadConfig(const std::string& path, const config::Config& started, Service* service) {
  auto loaded = config::Load(path);
  if (!loaded.ok()) {
    util::LogLine("config_reload_failed")
        .Add("config", path)
        .Add("error", loaded.error().message)
        .Add("note", "kept the running config")
        .Write();
    return false;
  }
  const std::shared_ptr<const config::Config> running = service->LiveConfig();
  config::ReloadPlan plan = config::PlanReload(*running, started, *loaded);
  service->SetConfig(std::make_shared<const config::Config>(std::move(plan.next)));
  util::LogLine line("config_reloaded");
  line.Add("config", path).Add("applied", plan.applied);
  if (!plan.needs_restart.empty()) {
    line.Add("needs_restart", plan.needs_restart)
        .Add("note", "these keys keep their running values until a restart");
  }
  line.Write();
  return true;
}

}  // namespace sandrun::api
