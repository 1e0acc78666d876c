#include "storage/artifact_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <filesystem>
#include <system_error>

#include "storage/digest.h"
#include "storage/file_copy.h"
#include "storage/fs.h"
#include "storage/mime.h"
#include "storage/signed_link.h"
#include "storage/user_store.h"

namespace sandrun::storage {
namespace {

constexpr size_t kMimeHead = 64 * 1024;  // enough for libmagic to tell ZIP/Office, PNG, PDF, ...
constexpr mode_t kDirMode = 0755;        // nginx (another user) must be able to read
constexpr mode_t kFileMode = 0644;

std::string TrimTrailingSlashes(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

// A fresh temporary name in the destination directory. Collisions are harmless (O_EXCL
// refuses them), but random names keep two publishers of one run from tripping each other.
Result<std::string> TempName() { return RandomName(".tmp-"); }

// Creates `name` in `dirfd` (0755) unless it exists, and opens it without following symlinks.
Result<UniqueFd> MakeDirAt(int dirfd, const std::string& name, const std::string& path) {
  const bool created = mkdirat(dirfd, name.c_str(), kDirMode) == 0;
  if (!created && LastErrno() != EEXIST) return StorageError("mkdirat", path, LastErrno());
  UniqueFd fd = OpenDirAt(dirfd, name);
  if (!fd.valid()) return StorageError("openat", path, LastErrno());
  // mkdirat's mode is filtered by the umask; nginx still has to be able to read.
  if (created && fchmod(fd.get(), kDirMode) != 0) return StorageError("fchmod", path, LastErrno());
  return fd;
}

// A source file opened for copying, or why it was skipped.
struct Source {
  UniqueFd fd;
  const char* skip_reason = nullptr;
};

// Opens workspace/<parts...> again, one component at a time with O_NOFOLLOW: the program is
// dead by now, but its files are not to be trusted, and a component that became a symlink
// since the walk must not lead us out of the workspace.
Source OpenSource(int workspace_fd, const std::vector<std::string>& parts) {
  Source source;
  UniqueFd dir;
  int parent = workspace_fd;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    UniqueFd next = OpenDirAt(parent, parts[i]);
    if (!next.valid()) {
      source.skip_reason = SkipReasonForFailedOpen(parent, parts[i], LastErrno());
      return source;
    }
    dir = std::move(next);
    parent = dir.get();
  }
  // O_NONBLOCK: a FIFO swapped in since the walk must not block the open; O_NOCTTY: nor may a
  // terminal device become ours. Both are no-ops for the regular file we expect.
  source.fd.Reset(openat(parent, parts.back().c_str(),
                         O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!source.fd.valid()) {
    source.skip_reason = SkipReasonForFailedOpen(parent, parts.back(), LastErrno());
    return source;
  }
  struct stat st;
  if (fstat(source.fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    source.fd.Reset();
    source.skip_reason = "not_regular";
  }
  return source;
}

// What one copy produced.
struct Copy {
  std::string temp_name;  // in the destination directory, still to be renamed
  uint64_t size = 0;
  uint64_t bytes_on_disk = 0;  // of the copy (file_copy.h)
  std::string sha256;
  std::string head;   // the first kMimeHead bytes, for libmagic
  bool grew = false;  // the source held more than `limit` bytes: nothing kept
};

class Publisher {
 public:
  Publisher(int workspace_fd, int run_fd, std::string run_path, std::string uri_base,
            const PublishOptions& options, int64_t expires)
      : workspace_fd_(workspace_fd),
        run_fd_(run_fd),
        run_path_(std::move(run_path)),
        uri_base_(std::move(uri_base)),
        options_(options),
        expires_(expires) {}

  // Publishes one file of the workspace, or records why it was skipped. Errors: a write to
  // the store failed.
  Status PublishOne(const FoundFile& file, PublishResult* result) {
    return PublishFrom(workspace_fd_, file.path, file, result);
  }
  // Publishes `source` (relative to `source_root`) as `file` (its path in the run's directory).
  Status PublishFrom(int source_root, const std::string& source, const FoundFile& file,
                     PublishResult* result);

 private:
  Result<UniqueFd> MakeParentDirs(const std::vector<std::string>& parts);
  Result<Copy> CopyToTemp(int src_fd, int dest_dir_fd, uint64_t limit, const std::string& path);
  ArtifactFile Describe(const FoundFile& file, const std::string& name, const Copy& copy) const;

  int workspace_fd_;
  int run_fd_;
  std::string run_path_;  // <root>/<user-dir>/<run-id>, for messages
  std::string uri_base_;  // <url_prefix>/<user-dir>/<run-id>, decoded
  const PublishOptions& options_;
  int64_t expires_;
};

Status Publisher::PublishFrom(int source_root, const std::string& source_path,
                              const FoundFile& file, PublishResult* result) {
  std::vector<std::string> parts;
  std::vector<std::string> source_parts;
  if (!SplitRelativePath(file.path, &parts) || !SplitRelativePath(source_path, &source_parts)) {
    // WalkWorkspace never yields such a path; a caller that does is refused the file. DESIGN.md
    // fixes the list of reasons, and "ignored" is the one that claims nothing about the file.
    result->skipped.push_back({file.path, "ignored"});
    return OkStatus();
  }
  if (parts.front() == kRecordDir) {
    // The store keeps its run record there; the export walk ignores ".sandrun/" anyway.
    result->skipped.push_back({file.path, "ignored"});
    return OkStatus();
  }
  Source source = OpenSource(source_root, source_parts);
  if (source.skip_reason != nullptr) {
    result->skipped.push_back({file.path, source.skip_reason});
    return OkStatus();
  }
  const std::string dest_path = run_path_ + "/" + file.path;
  auto dir = MakeParentDirs(parts);
  if (!dir.ok()) return dir.error();
  // The walk's size already passed max_file_bytes; copying no more than it re-applies that
  // bound to a file that grew since.
  auto copy = CopyToTemp(source.fd.get(), dir->get(), file.size, dest_path);
  if (!copy.ok()) return copy.error();
  if (copy->grew) {
    unlinkat(dir->get(), copy->temp_name.c_str(), 0);
    result->skipped.push_back({file.path, "too_large"});
    return OkStatus();
  }
  // rename(2) is atomic: nginx serves either nothing or the whole file, never a prefix.
  if (renameat(dir->get(), copy->temp_name.c_str(), dir->get(), parts.back().c_str()) != 0) {
    return StorageError("renameat", dest_path, LastErrno());
  }
  result->files.push_back(Describe(file, parts.back(), *copy));
  result->stored += Usage{1, copy->bytes_on_disk};
  return OkStatus();
}

Result<UniqueFd> Publisher::MakeParentDirs(const std::vector<std::string>& parts) {
  UniqueFd dir(fcntl(run_fd_, F_DUPFD_CLOEXEC, 0));
  if (!dir.valid()) return StorageError("fcntl", run_path_, LastErrno());
  std::string dir_path = run_path_;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    dir_path += "/" + parts[i];
    auto next = MakeDirAt(dir.get(), parts[i], dir_path);
    if (!next.ok()) return next.error();
    dir = std::move(*next);
  }
  return dir;
}

Result<Copy> Publisher::CopyToTemp(int src_fd, int dest_dir_fd, uint64_t limit,
                                   const std::string& path) {
  auto temp_name = TempName();
  if (!temp_name.ok()) return temp_name.error();
  Copy copy;
  copy.temp_name = std::move(*temp_name);
  UniqueFd out(openat(dest_dir_fd, copy.temp_name.c_str(),
                      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, kFileMode));
  if (!out.valid()) return StorageError("openat", path + " (temporary)", LastErrno());
  // The create mode is filtered by the umask; nginx still has to be able to read.
  if (fchmod(out.get(), kFileMode) != 0) return StorageError("fchmod", path, LastErrno());
  Sha256 sha;
  auto observe = [&](const char* data, size_t size) {
    sha.Update(data, size);
    if (copy.head.size() < kMimeHead)
      copy.head.append(data, std::min(size, kMimeHead - copy.head.size()));
  };
  // Holes stay holes: a sparse file costs the store the blocks it really uses.
  auto copied = CopyFileKeepingHoles(src_fd, out.get(), limit, path, observe);
  if (!copied.ok()) return copied.error();
  if (copied->too_large) {
    copy.grew = true;
    return copy;
  }
  // No fsync: a crash loses the run's links anyway, and the janitor sweeps what is left. But
  // close(2) can still report a deferred write error (ENOSPC, EIO on some file systems).
  if (close(out.Release()) != 0) return StorageError("close", path, LastErrno());
  copy.size = copied->size;
  copy.bytes_on_disk = copied->bytes_on_disk;
  copy.sha256 = sha.FinalHex();
  return copy;
}

ArtifactFile Publisher::Describe(const FoundFile& file, const std::string& name,
                                 const Copy& copy) const {
  ArtifactFile artifact;
  artifact.name = name;
  artifact.path = file.path;
  artifact.size = copy.size;
  artifact.mime = GuessMime(copy.head.data(), copy.head.size(), name);
  artifact.sha256 = copy.sha256;
  // nginx checks the signature against the decoded $uri, so sign the raw path and encode it
  // only for the URL.
  const std::string uri = uri_base_ + "/" + file.path;
  artifact.url = TrimTrailingSlashes(options_.public_base_url) + PercentEncodePath(uri) +
                 "?md5=" + SecureLinkMd5(uri, expires_, options_.link_secret) +
                 "&expires=" + std::to_string(expires_);
  artifact.expires_at = expires_;
  return artifact;
}

// The artifacts root, created if missing. It is the daemon's own configured directory, so
// plain path resolution is fine there.
Result<UniqueFd> OpenRoot(const std::string& root) {
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec) {
    return MakeError(ErrorKind::kSystem, "create_directories(" + root + "): " + ec.message(),
                     ec.value());
  }
  UniqueFd root_fd(open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd.valid()) return StorageError("open", root, LastErrno());
  return root_fd;
}

// The staging directory of a run being published: .staging-<run-id> in the user directory.
struct Staging {
  std::string name;
  UniqueFd fd;
};

// Creates the staging directory; the caller holds the user directory's lock. Errors: the run
// id is already published or being published, or mkdirat fails.
Result<Staging> MakeStaging(const UserDirLock& lock, const std::string& run_id) {
  struct stat st;
  if (fstatat(lock.fd(), run_id.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    return MakeError(ErrorKind::kSystem, lock.path() + "/" + run_id + ": run already published",
                     EEXIST);
  }
  Staging staging;
  staging.name = std::string(kStagingPrefix) + run_id;
  const std::string path = lock.path() + "/" + staging.name;
  // EEXIST here: the same run id is being published by another call right now.
  if (mkdirat(lock.fd(), staging.name.c_str(), kDirMode) != 0) {
    return StorageError("mkdirat", path, LastErrno());
  }
  staging.fd = OpenDirAt(lock.fd(), staging.name);
  if (!staging.fd.valid()) return StorageError("openat", path, LastErrno());
  // mkdirat's mode is filtered by the umask; nginx still has to be able to read.
  if (fchmod(staging.fd.get(), kDirMode) != 0) return StorageError("fchmod", path, LastErrno());
  return staging;
}

// Writes the run record, makes room for `run` and renames its staging directory to the run
// id, under the user's lock: two runs of one user going live at once would otherwise both
// count the same free room.
// Returns the trash names of the evicted runs, to be deleted once unlocked. On error the
// staging directory is left for the caller to discard.
Result<std::vector<std::string>> GoLive(UserDirLock& lock, const Staging& staging, RunInfo run,
                                        const Quota& quota, const Usage& reserved,
                                        PublishResult* result) {
  if (Status s = lock.Relock(); !s.ok()) return s.error();
  // Stamped under the lock, so the order of live_ns is the order runs went live.
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  run.live_ns = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  if (Status s = WriteRunRecord(staging.fd.get(), run, lock.path() + "/" + run.run_id); !s.ok()) {
    return s.error();
  }
  auto runs = ScanRuns(lock.fd(), lock.path());
  if (!runs.ok()) return runs.error();
  // The copy never exceeds the walked sizes, which fit, so the run fits with the others gone.
  Usage incoming = run.usage;
  incoming += reserved;
  const EvictionPlan plan = PlanEviction(std::move(*runs), incoming, quota);
  std::vector<std::string> trash;
  for (const std::string& victim : plan.evict) {
    // Renamed away first: nginx stops serving the whole run at once.
    auto name = MoveToTrash(lock.fd(), victim, lock.path());
    if (!name.ok() && name.error().err == ENOENT) continue;
    if (!name.ok()) return name.error();
    trash.push_back(*name);
    result->evicted.push_back(victim);
  }
  // RENAME_NOREPLACE: a run id is published once; never merge into or replace another run.
  if (renameat2(lock.fd(), staging.name.c_str(), lock.fd(), run.run_id.c_str(), RENAME_NOREPLACE) !=
      0) {
    return StorageError("renameat2", lock.path() + "/" + run.run_id, LastErrno());
  }
  lock.Unlock();
  return trash;
}

}  // namespace

Result<PublishResult> Publish(const std::string& workspace, const std::vector<FoundFile>& files,
                              const std::string& user, const std::string& run_id,
                              const PublishOptions& options) {
  return Publish(workspace, files, ExtraSource{}, user, run_id, options);
}

Result<PublishResult> Publish(const std::string& workspace, const std::vector<FoundFile>& files,
                              const ExtraSource& extra, const std::string& user,
                              const std::string& run_id, const PublishOptions& options) {
  if (!IsRunId(run_id))
    return MakeError(ErrorKind::kSystem, "Publish: bad run id '" + run_id + "'");
  PublishResult result;
  // No empty run directories for the janitor to sweep.
  if (files.empty() && extra.files.empty()) return result;
  for (const FoundFile& file : files) result.requested += Usage{1, file.bytes_on_disk};
  for (const ExtraFile& file : extra.files) result.requested += Usage{1, file.file.bytes_on_disk};
  Usage with_reserved = result.requested;
  with_reserved += options.reserved;
  if (!Fits(with_reserved, options.quota)) {
    // Refused before anything is copied: evicting every older run would not make room.
    result.over_quota = true;
    for (const FoundFile& file : files) result.skipped.push_back({file.path, "quota"});
    for (const ExtraFile& file : extra.files) result.skipped.push_back({file.file.path, "quota"});
    return result;
  }
  UniqueFd workspace_fd(open(workspace.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!workspace_fd.valid()) return StorageError("open", workspace, LastErrno());
  UniqueFd extra_fd;
  if (!extra.files.empty()) {
    extra_fd.Reset(open(extra.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!extra_fd.valid()) return StorageError("open", extra.dir, LastErrno());
  }
  const std::string root = TrimTrailingSlashes(options.artifacts_root);
  auto root_fd = OpenRoot(root);
  if (!root_fd.ok()) return root_fd.error();
  const std::string user_dir = UserDir(user, options.user_dir_key);
  auto lock =
      UserDirLock::Acquire(root_fd->get(), user_dir, /*create=*/true, root + "/" + user_dir);
  if (!lock.ok()) return lock.error();
  auto staging = MakeStaging(*lock, run_id);
  if (!staging.ok()) return staging.error();
  // The staging directory keeps the user directory from being removed by the janitor, so the
  // copy, the slow part, can run without holding the user's lock.
  lock->Unlock();
  const std::string run_path = lock->path() + "/" + run_id;
  auto discard = [&](Error error) -> Error {
    staging->fd.Reset();
    if (!RemoveTreeAt(lock->fd(), staging->name)) error.message += " (cleanup incomplete)";
    return error;
  };

  const int64_t now = options.now_epoch_s != 0 ? options.now_epoch_s : time(nullptr);
  const std::string uri_base =
      TrimTrailingSlashes(options.url_prefix) + "/" + user_dir + "/" + run_id;
  Publisher publisher(workspace_fd.get(), staging->fd.get(), run_path, uri_base, options,
                      LinkExpiresAt(now, options.link_ttl_s, now, options.max_age_s));
  for (const FoundFile& file : files) {
    // Nothing of a failed run is published: the staging directory goes whole.
    if (Status status = publisher.PublishOne(file, &result); !status.ok()) {
      return discard(status.error());
    }
  }
  for (const ExtraFile& file : extra.files) {
    if (Status status = publisher.PublishFrom(extra_fd.get(), file.source, file.file, &result);
        !status.ok()) {
      return discard(status.error());
    }
  }
  if (result.files.empty()) {
    // Every file was skipped: leave no empty run directory behind.
    discard(Error{});
    return result;
  }
  RunInfo run{run_id, now, 0, result.stored};
  auto trash = GoLive(*lock, *staging, run, options.quota, options.reserved, &result);
  if (!trash.ok()) return discard(trash.error());
  for (const std::string& name : *trash) RemoveTreeAt(lock->fd(), name);
  return result;
}

}  // namespace sandrun::storage
