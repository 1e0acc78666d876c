#include "storage/janitor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>

#include "storage/fs.h"
#include "storage/user_store.h"

namespace sandrun::storage {
namespace {

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

struct UserSweep {
  const JanitorOptions& options;
  int64_t now;
  bool all_leftovers;
  SweepStats* stats;

  void Note(const Error& error) { stats->errors.push_back(error.message); }

  // Renames expired runs and stale leftovers of one locked user directory to trash; returns
  // the trash names to delete once the lock is released.
  std::vector<std::string> Collect(const UserDirLock& lock) {
    std::vector<std::string> trash;
    auto runs = ScanRuns(lock.fd(), lock.path());
    if (!runs.ok()) {
      Note(runs.error());
      return trash;
    }
    for (const RunInfo& run : *runs) {
      if (!RunExpired(run.created_at, options.max_age_s, now)) {
        ++stats->runs_kept;
        stats->kept += run.usage;
        continue;
      }
      auto name = MoveToTrash(lock.fd(), run.run_id, lock.path());
      if (!name.ok()) {
        if (name.error().err != ENOENT) Note(name.error());
        continue;
      }
      trash.push_back(*name);
      ++stats->runs_removed;
    }
    bool truncated = false;
    auto names = ListDir(lock.fd(), SIZE_MAX, &truncated);
    if (!names.ok()) {
      Note(names.error());
      return trash;
    }
    for (const std::string& name : *names) {
      const bool is_trash = StartsWith(name, kTrashPrefix);
      if (!is_trash && !StartsWith(name, kStagingPrefix)) continue;
      // ctime, not mtime: rename(2) updates it, so a run just moved to trash by a publisher
      // (which is deleting it right now) does not look old.
      struct stat st;
      if (fstatat(lock.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (!all_leftovers && now - static_cast<int64_t>(st.st_ctime) < options.leftover_age_s) {
        continue;
      }
      if (is_trash) {
        trash.push_back(name);
      } else {
        // A stale staging directory is renamed to trash like a run, so that a publisher that
        // is somehow still alive fails its final rename instead of going live half-deleted.
        auto moved = MoveToTrash(lock.fd(), name, lock.path());
        if (!moved.ok()) continue;
        trash.push_back(*moved);
      }
      ++stats->leftovers_removed;
    }
    return trash;
  }

  void Sweep(int root_fd, const std::string& name, const std::string& path) {
    std::vector<std::string> trash;
    {
      auto lock = UserDirLock::Acquire(root_fd, name, /*create=*/false, path);
      if (!lock.ok()) return Note(lock.error());
      if (!lock->valid()) return;  // removed meanwhile
      trash = Collect(*lock);
      for (const std::string& t : trash) {
        if (!RemoveTreeAt(lock->fd(), t)) {
          stats->errors.push_back("cannot remove all of " + path + "/" + t);
        }
      }
    }
    RemoveIfEmpty(root_fd, name, path);
  }

  // Removes the user directory if nothing is left in it, under its lock: a publisher opens
  // and locks it before creating anything in it, and retries when it finds it removed.
  void RemoveIfEmpty(int root_fd, const std::string& name, const std::string& path) {
    auto lock = UserDirLock::Acquire(root_fd, name, /*create=*/false, path);
    if (!lock.ok() || !lock->valid()) return;
    bool truncated = false;
    auto names = ListDir(lock->fd(), 1, &truncated);
    if (!names.ok() || !names->empty()) return;
    if (unlinkat(root_fd, name.c_str(), AT_REMOVEDIR) == 0) ++stats->user_dirs_removed;
  }
};

}  // namespace

SweepStats SweepArtifacts(const JanitorOptions& options, int64_t now, bool all_leftovers) {
  SweepStats stats;
  std::string root = options.artifacts_root;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  // The root is the daemon's own configured directory: plain path resolution is fine there.
  UniqueFd root_fd(open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd.valid()) {
    if (LastErrno() != ENOENT) {
      stats.errors.push_back(StorageError("open", root, LastErrno()).message);
    }
    return stats;
  }
  bool truncated = false;
  auto names = ListDir(root_fd.get(), SIZE_MAX, &truncated);
  if (!names.ok()) {
    stats.errors.push_back(names.error().message);
    return stats;
  }
  UserSweep sweep{options, now, all_leftovers, &stats};
  for (const std::string& name : *names) {
    if (name[0] == '.') continue;  // not a user directory
    struct stat st;
    if (fstatat(root_fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISDIR(st.st_mode)) continue;  // nothing of ours; never follow a symlink
    sweep.Sweep(root_fd.get(), name, root + "/" + name);
  }
  return stats;
}

Janitor::Janitor(JanitorOptions options, int64_t interval_s, Clock clock, Report report)
    : options_(std::move(options)),
      interval_s_(interval_s > 0 ? interval_s : 1),
      clock_(clock ? std::move(clock) : Clock([] { return static_cast<int64_t>(time(nullptr)); })),
      report_(std::move(report)) {}

Janitor::~Janitor() { Stop(); }

void Janitor::Start() {
  SweepAndReport(/*all_leftovers=*/true);
  std::lock_guard lock(mu_);
  if (!thread_.joinable() && !stopping_) thread_ = std::thread(&Janitor::Loop, this);
}

void Janitor::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int64_t Janitor::sweeps() const {
  std::lock_guard lock(mu_);
  return sweeps_;
}

void Janitor::SweepAndReport(bool all_leftovers) {
  const SweepStats stats = SweepArtifacts(options_, clock_(), all_leftovers);
  {
    std::lock_guard lock(mu_);
    ++sweeps_;
  }
  if (report_) report_(stats);
}

void Janitor::Loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, std::chrono::seconds(interval_s_), [this] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    SweepAndReport(/*all_leftovers=*/false);
    lock.lock();
  }
}

}  // namespace sandrun::storage
