#include "api/housekeeping.h"

#include <cstdio>

namespace sandrun::api {

void LogSweep(const storage::SweepStats& stats, bool always) {
  if (!always && stats.runs_removed == 0 && stats.leftovers_removed == 0 &&
      stats.user_dirs_removed == 0 && stats.errors.empty()) {
    return;
  }
  std::fprintf(
      stderr,
      "sandrund: janitor: removed %lld expired runs, %lld leftovers, %lld empty user "
      "dirs; kept %lld runs (%llu files, %llu bytes)%s%s\n",
      static_cast<long long>(stats.runs_removed), static_cast<long long>(stats.leftovers_removed),
      static_cast<long long>(stats.user_dirs_removed), static_cast<long long>(stats.runs_kept),
      static_cast<unsigned long long>(stats.kept.files),
      static_cast<unsigned long long>(stats.kept.bytes),
      stats.errors.empty() ? "" : "; first error: ",
      stats.errors.empty() ? "" : stats.errors.front().c_str());
}

std::unique_ptr<storage::Janitor> StartJanitor(const config::Config& config, Service& service) {
  auto janitor = std::make_unique<storage::Janitor>(
      storage::JanitorOptions{config.artifacts_dir, config.artifact_max_age_s},
      config.janitor_interval_s, storage::Janitor::Clock{},
      [first = true, &service](const storage::SweepStats& stats) mutable {
        LogSweep(stats, first);
        first = false;
        service.SetArtifactUsage(stats.kept.files, stats.kept.bytes);
        // Idle sessions go with the same sweep (DESIGN.md §6).
        if (int removed = service.SweepIdleSessions(); removed > 0) {
          std::fprintf(stderr, "sandrund: janitor: removed %d idle sessions\n", removed);
        }
        // And prepared environments past environments_max_mb, least recently used first.
        if (int removed = service.SweepEnvironments(); removed > 0) {
          std::fprintf(stderr, "sandrund: janitor: removed %d prepared environments\n", removed);
        }
      });
  janitor->Start();
  return janitor;
}

}  // namespace sandrun::api
