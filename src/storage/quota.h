// Per-user quota and expiry of published runs (DESIGN.md §4): the pure decisions, without
// touching the disk. user_store.h and janitor.h apply them to the store.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sandrun::storage {

// Files and bytes, of one run or of all runs of a user.
struct Usage {
  uint64_t files = 0;
  uint64_t bytes = 0;

  Usage& operator+=(const Usage& other) {
    files += other.files;
    bytes += other.bytes;
    return *this;
  }
};

// What one user may keep published. 0 in a field means no bound on it.
struct Quota {
  uint64_t max_files = 0;
  uint64_t max_bytes = 0;
};

// A published run as the store records it (user_store.h reads it from the run's record).
struct RunInfo {
  std::string run_id;      // the run's directory name
  int64_t created_at = 0;  // epoch seconds when it was published: its age, for expiry
  // Real time (ns since the epoch) when it went live, taken under the user's lock: orders
  // runs published within one second, which is common.
  int64_t live_ns = 0;
  Usage usage;
};

// Whether `usage` is within `quota` (equal counts as within).
bool Fits(const Usage& usage, const Quota& quota);

struct EvictionPlan {
  // False when the incoming run alone is over the quota: it must be refused whole and
  // nothing evicted for it (evicting everything would still not make room).
  bool fits = true;
  std::vector<std::string> evict;  // run ids, oldest first
};

// Which of `runs` (a user's published runs, any order) to evict so that they plus `incoming`
// fit `quota`: the oldest first (by created_at, then live_ns, then run id, so the choice is
// stable), and no more than needed. Pure.
EvictionPlan PlanEviction(std::vector<RunInfo> runs, const Usage& incoming, const Quota& quota);

// Whether a run published at `created_at` is past its maximum age at `now`: strictly after
// created_at + max_age_s, the last second in which nginx still accepts a link made with
// LinkExpiresAt. max_age_s <= 0 means runs never expire.
bool RunExpired(int64_t created_at, int64_t max_age_s, int64_t now);

// The expiry of a link made at `now` for a file of a run published at `created_at`: the
// earlier of the link lifetime and the file's maximum age, so that a link never outlives its
// file. max_age_s <= 0 means the file has no maximum age.
int64_t LinkExpiresAt(int64_t now, int64_t link_ttl_s, int64_t created_at, int64_t max_age_s);

// Why a run was refused whole, for the user: "the run's 5 files (3.1 MiB) are over the
// per-user quota of 4 files and 256 MiB; none were published".
std::string DescribeOverQuota(const Usage& requested, const Quota& quota);

// The run record kept beside a run's files (user_store.h): a few "key value" lines.
std::string EncodeRunRecord(const RunInfo& run);
// Parses EncodeRunRecord's text; run_id is left empty (the record does not name its run).
// nullopt when the text is not a complete record of this version.
std::optional<RunInfo> ParseRunRecord(const std::string& text);

}  // namespace sandrun::storage
