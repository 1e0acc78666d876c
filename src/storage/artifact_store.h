// Artifact store: publish a run's generated files under <root>/<user-dir>/<run-id>/<path>.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "storage/export.h"
#include "storage/quota.h"
#include "util/result.h"

namespace sandrun::storage {

struct ArtifactFile {
  std::string name;        // base name
  std::string path;        // workspace-relative path
  uint64_t size = 0;       // bytes
  std::string mime;        // from libmagic (content) and the name
  std::string sha256;      // hex
  std::string url;         // absolute, signed, time-limited
  int64_t expires_at = 0;  // epoch seconds
};

struct PublishOptions {
  std::string artifacts_root;         // <state>/artifacts
  std::string public_base_url;        // e.g. "http://127.0.0.1:8080" (no trailing slash)
  std::string url_prefix = "/files";  // path under which nginx serves artifacts_root
  std::string link_secret;            // shared with nginx
  std::string user_dir_key;           // key for UserDir()
  int64_t link_ttl_s = 3600;          // link lifetime
  int64_t max_age_s = 0;              // files are deleted this long after publishing (0 = never)
  Quota quota;                        // per user; the user's oldest runs are evicted to make room
  Usage reserved;  // counted against `quota` but never evicted: what the user's sessions hold
  int64_t now_epoch_s = 0;  // injected clock (0 = time(nullptr))
};

struct PublishResult {
  std::vector<ArtifactFile> files;
  // Files that vanished or changed type during the copy; or, when over_quota, every file.
  std::vector<SkippedFile> skipped;
  // The run alone is over the user's quota: nothing was published, nothing evicted, and
  // every file is in `skipped` with reason "quota".
  bool over_quota = false;
  // What the run's files came to, as walked (bytes on disk, file_copy.h, not st_size).
  Usage requested;
  Usage stored;                      // what the published copies use (holes kept)
  std::vector<std::string> evicted;  // run ids of this user evicted to make room
};

// Copies `files` (found by WalkWorkspace in `workspace`) into
// <artifacts_root>/<UserDir(user)>/<run_id>/<path> (user_store.h has the layout), opening
// every source component with O_NOFOLLOW. The run is copied into a staging directory that is
// renamed to <run_id> only when complete, so nginx serves all of a run or nothing of it.
// Before that rename, under the user directory's lock (so concurrent runs of one user cannot
// both squeeze in), the user's oldest runs are evicted until the new run fits the quota; a
// run that alone (with options.reserved) exceeds the quota is refused whole (over_quota).
// Files are copied keeping holes and counted by the blocks they use (file_copy.h). Links expire at
// the earlier of link_ttl_s and max_age_s. A workspace path under ".sandrun/" is skipped
// ("ignored"): the store keeps the run record there. Errors: a bad or already published run id,
// cannot create the directories, disk full or a write error (then nothing of the run stays
// published and nothing was evicted). Not safe after fork.
Result<PublishResult> Publish(const std::string& workspace, const std::vector<FoundFile>& files,
                              const std::string& user, const std::string& run_id,
                              const PublishOptions& options);

// Files published in the same run from a directory other than the workspace: the figures a
// program showed, from its outputs area (outputs.h). `source` is the file's path in `dir`;
// `file.path` its path in the run's artifact directory (and in ArtifactFile::path).
struct ExtraFile {
  std::string source;
  FoundFile file;
};
struct ExtraSource {
  std::string dir;
  std::vector<ExtraFile> files;
};

// Publish as above, with `extra`'s files too, after the workspace's (same quota, same
// staging, all or nothing). Each extra path must not be, contain or lie under a path of
// `files` (display_manifest.h picks such paths). Errors: as above; `extra.dir` cannot be
// opened. Not safe after fork.
Result<PublishResult> Publish(const std::string& workspace, const std::vector<FoundFile>& files,
                              const ExtraSource& extra, const std::string& user,
                              const std::string& run_id, const PublishOptions& options);

}  // namespace sandrun::storage
