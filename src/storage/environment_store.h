// Prepared environments: one directory of installed Python packages per
// normalised set of requirements, content-addressed under <root>/<id>, built once by a
// Builder on a thread of the store, published by renaming its build directory, leased by the
// runs that mount it, and evicted least-recently-used first when the store is over its size.
// Knows nothing of sandboxes or HTTP: the Builder does the building. Thread-safe.
//
// Layout: <root>/<id>/meta (the set, build time and size; its mtime is the last use) and
// <root>/<id>/ws/site (the packages: what a run puts on its import path). While building:
// <root>/.build-<id>/; being deleted: <root>/.trash-<id>-<n>/.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sandrun::storage {

// Where a Builder leaves the packages inside the build directory, and where they are after.
inline constexpr char kEnvironmentSite[] = "ws/site";

struct EnvironmentMeta {
  std::string id;
  std::vector<std::string> packages;  // the set, as given to Acquire
  int64_t build_ms = 0;               // how long its build took
  uint64_t bytes = 0;                 // apparent size of its files
};

struct BuildResult {
  bool ok = false;
  std::string output;  // pip's output (kept when the build failed)
};

class EnvironmentStore {
 public:
  // Fills `build_dir` (exists, empty) with the packages at <build_dir>/ws/site. Runs on a
  // thread of the store; may take long (its own budget).
  using Builder = std::function<BuildResult(const std::string& build_dir,
                                            const std::vector<std::string>& packages)>;

  struct Options {
    std::string root;             // created if missing
    std::string python;           // e.g. "python3.11": part of every id
    int64_t failure_ttl_s = 600;  // a failed build is not retried for this long
    int64_t max_builds = 2;       // builds at once; more sets get kBusy
  };

  // Deletes leftovers of builds and deletions a previous process did not finish.
  EnvironmentStore(Options options, Builder builder);
  ~EnvironmentStore();  // waits for the builds in progress
  EnvironmentStore(const EnvironmentStore&) = delete;
  EnvironmentStore& operator=(const EnvironmentStore&) = delete;

  // 32 hex digits: SHA-256 of the Python version and the packages (sorted by the caller).
  std::string IdOf(const std::vector<std::string>& packages) const;

  // A run's hold on an environment: not evicted while held. Movable; released on destruction.
  class Lease {
   public:
    Lease() = default;
    Lease(EnvironmentStore* owner, std::string id) : owner_(owner), id_(std::move(id)) {}
    Lease(Lease&& other) noexcept : owner_(other.owner_), id_(std::move(other.id_)) {
      other.owner_ = nullptr;
    }
    Lease& operator=(Lease&& other) noexcept;
    Lease(const Lease&) = delete;
    ~Lease() { Release(); }
    bool held() const { return owner_ != nullptr; }

   private:
    void Release();
    EnvironmentStore* owner_ = nullptr;
    std::string id_;
  };

  enum class Outcome {
    kCached,    // was there already
    kBuilt,     // built (by this call or one it waited for) while the call waited
    kFailed,    // its build failed, now or within failure_ttl_s: see failure_output
    kBuilding,  // still building after `wait`
    kBusy,      // not present and max_builds others are building
    kAbsent,    // not present and the call may not build it
  };
  struct Answer {
    Outcome outcome = Outcome::kAbsent;
    EnvironmentMeta meta;        // with kCached/kBuilt; id always set
    std::string site_dir;        // host path of its packages, with kCached/kBuilt
    std::string failure_output;  // with kFailed
    int64_t retry_after_s = 0;   // with kFailed (until retried), kBuilding, kBusy
    Lease lease;                 // held with kCached/kBuilt
  };

  // The environment of `packages` (a sorted set of requirement texts): present, or built
  // when `may_build` (others asking meanwhile wait for the same build), waiting at most
  // `wait` for a build in progress.
  Answer Acquire(const std::vector<std::string>& packages, bool may_build,
                 std::chrono::milliseconds wait);

  // Starts building `packages` unless present, building, or failed recently. Returns at once.
  void Prebuild(const std::vector<std::string>& packages);

  // A present environment for a run that did not name one (a markdown run's install steps
  // asking for `packages`, a sorted set of requirement texts), leased: the one built from
  // exactly that set, whoever asked for it first (its build installed what the index gives
  // for the set, nothing else); else the smallest of `trusted` (ids of sets the admin chose)
  // in which every entry of `packages` is `covered`. kAbsent when none. An environment built
  // from more than was asked is never served to a run that did not choose it: another user's
  // extra distribution could replace or shadow the modules asked for.
  Answer FindServing(const std::vector<std::string>& packages,
                     const std::vector<std::string>& trusted,
                     const std::function<bool(const std::string& want,
                                              const std::vector<std::string>& have)>& covered);

  // Deletes least-recently-used environments until the store holds at most `max_bytes`;
  // never a leased one. Returns the ids removed.
  std::vector<std::string> Evict(uint64_t max_bytes);

  // Builds started since the store was made.
  int64_t builds_started() const;

 private:
  struct Failure {
    int64_t at_s = 0;
    std::string output;
  };
  std::string DirOf(const std::string& id) const { return options_.root + "/" + id; }
  // Fills `answer` from a present environment and leases it; false when not present. With mu_.
  bool TakePresent(const std::string& id, Answer* answer);
  void Build(std::string id, std::vector<std::string> packages);
  // Starts Build on a thread; with mu_ held.
  void StartBuild(const std::string& id, const std::vector<std::string>& packages);
  std::vector<EnvironmentMeta> ListPresent() const;

  const Options options_;
  const Builder builder_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, int64_t> building_;  // id -> start (epoch s)
  std::map<std::string, Failure> failed_;
  std::map<std::string, int64_t> leases_;  // id -> runs holding it
  std::vector<std::thread> threads_;
  int64_t builds_started_ = 0;
  int64_t trash_serial_ = 0;
};

}  // namespace sandrun::storage
