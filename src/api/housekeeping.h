// The daemon's periodic housekeeping: one janitor
// thread sweeps the artifact store, then idle sessions (DESIGN.md §6) and prepared
// environments past environments_max_mb, and logs what it removed.
#pragma once

#include <memory>

#include "api/service.h"
#include "config/config.h"
#include "storage/janitor.h"

namespace sandrun::api {

// Starts the janitor (storage/janitor.h) over config.artifacts_dir every
// config.janitor_interval_s. Its first sweep runs in the calling thread, before any request,
// and also clears what a crash left half-published or half-deleted; it is always logged,
// later sweeps only when they removed something or failed. Call it after the stop signals
// are blocked (its thread inherits the mask). `service` must outlive the janitor (destroy
// the janitor first). Not safe after fork.
std::unique_ptr<storage::Janitor> StartJanitor(const config::Config& config, Service& service);

// The janitor's line for one sweep: always with `always`, else only when the sweep removed
// something or failed somewhere.
void LogSweep(const storage::SweepStats& stats, bool always);

}  // namespace sandrun::api
