// The janitor of the artifact store (DESIGN.md §4): deletes runs past their maximum age,
// leftovers of interrupted publishes and deletions, and user directories left empty.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "storage/quota.h"

namespace sandrun::storage {

struct JanitorOptions {
  std::string artifacts_root;
  int64_t max_age_s = 86400;  // runs older than this are deleted (<= 0: never)
  // Staging and trash directories (user_store.h) untouched for this long belong to a publish
  // or deletion that died with a crash, and are deleted. Live ones take seconds.
  int64_t leftover_age_s = 3600;
};

struct SweepStats {
  int64_t runs_removed = 0;       // expired runs
  int64_t leftovers_removed = 0;  // staging and trash directories
  int64_t user_dirs_removed = 0;  // left empty
  int64_t runs_kept = 0;
  Usage kept;                       // files and bytes of the runs kept
  std::vector<std::string> errors;  // what could not be read or removed (the sweep goes on)
};

// One pass over <artifacts_root>, at `now` (epoch seconds). Each user directory is handled
// under its lock (user_store.h): expired runs are renamed to trash at once, so nginx stops
// serving all of a run together, and deleted after the lock is released. With
// `all_leftovers`, staging and trash directories of any age are deleted: only right for a
// sweep before the daemon publishes anything (at start-up). Never follows a symlink.
// A missing root is not an error. Not safe after fork.
SweepStats SweepArtifacts(const JanitorOptions& options, int64_t now, bool all_leftovers = false);

// Runs SweepArtifacts in a thread of its own, every interval. Thread-safe.
class Janitor {
 public:
  using Clock = std::function<int64_t()>;                 // epoch seconds
  using Report = std::function<void(const SweepStats&)>;  // called after each sweep

  // `clock` defaults to time(2); `report` may be empty.
  Janitor(JanitorOptions options, int64_t interval_s, Clock clock = {}, Report report = {});
  ~Janitor();  // Stop()
  Janitor(const Janitor&) = delete;
  Janitor& operator=(const Janitor&) = delete;

  // Sweeps once in the calling thread, deleting leftovers of any age (call it before the
  // daemon publishes anything), then starts the thread that sweeps every interval.
  void Start();
  // Stops the thread, waiting for a sweep in progress to finish. Idempotent.
  void Stop();
  // Sweeps completed so far.
  int64_t sweeps() const;

 private:
  void SweepAndReport(bool all_leftovers);
  void Loop();

  const JanitorOptions options_;
  const int64_t interval_s_;
  const Clock clock_;
  const Report report_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  int64_t sweeps_ = 0;
  std::thread thread_;
};

}  // namespace sandrun::storage
