// SIGHUP: which config keys a running daemon takes over from a reloaded file, and which need
// a restart (docs/OPERATIONS.md "Run like a service"). Pure functions on loaded configs;
// thread-safe.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"

namespace sandrun::config {

// Whether `key` (named as ChangedKeys names it) changes live: the keys the key table marks
// live (KeyTable: the per-user quota, who may call, the lifetime of new download links, ...),
// every "limits.<name>" and "ceilings.<name>", and "tokens" (what tokens_file and
// bearer_tokens hold). Each is read per request, so a new value applies to requests that
// start after the reload. Every other key needs a restart (sockets, paths, cgroups, the
// sandbox ids, the pool and queue sizes, the link secret, "languages", "pool", ...).
bool IsLiveKey(const std::string& key);

struct ReloadPlan {
  Config next;                             // `running` with the live keys of `loaded`
  std::vector<std::string> applied;        // live keys whose value changes now
  std::vector<std::string> needs_restart;  // other keys that differ from the start-up config
};

// `running`: the config requests use now; `started`: the config as loaded at start-up,
// before the daemon adjusted anything in it (the runs_dir fallback); `loaded`: the file as
// config::Load read it now (validated: limits within their ceilings, tokens readable).
ReloadPlan PlanReload(const Config& running, const Config& started, const Config& loaded);

}  // namespace sandrun::config
