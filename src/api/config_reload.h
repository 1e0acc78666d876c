// SIGHUP in the daemon: re-reads the config file (and the tokens file it names) and hands
// the live keys to the service (config/reload.h); logs what changed, what needs a restart,
// or why the file was refused (then nothing changes). Called from the signal thread.
#pragma once

#include <string>

#include "api/service.h"
#include "config/config.h"

namespace sandrun::api {

// `path`: the daemon's --config ("" = defaults and environment only); `started`: the config
// as loaded at start-up. Returns true if the new file was taken (even with no change).
bool ReloadConfig(const std::string& path, const config::Config& started, Service* service);

}  // namespace sandrun::api
