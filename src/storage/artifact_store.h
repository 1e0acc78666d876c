// Artifact store: publish a run's generated files under <root>/<user-dir>/<run-id>/<path>.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "storage/export.h"
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
  std::string artifacts_root;   // <state>/artifacts
  std::string public_base_url;  // e.g. "http://127.0.0.1:8080" (no trailing slash)
  std::string url_prefix = "/files";  // path under which nginx serves artifacts_root
  std::string link_secret;      // shared with nginx
  std::string user_dir_key;     // key for UserDir()
  int64_t link_ttl_s = 3600;    // link lifetime
  int64_t now_epoch_s = 0;      // injected clock (0 = time(nullptr))
};

struct PublishResult {
  std::vector<ArtifactFile> files;
  std::vector<SkippedFile> skipped;  // files that vanished or changed type during the copy
};

// Copies `files` (found by WalkWorkspace in `workspace`) into
// <artifacts_root>/<UserDir(user)>/<run_id>/<path>, opening every source component with
// O_NOFOLLOW, writing each through a temporary name and rename(2) so nginx never serves a
// half-written file. Fills mime, sha256, signed url and expiry. Errors: cannot create the
// run directory, disk full or write error (then nothing of the run stays published).
// Not safe after fork.
Result<PublishResult> Publish(const std::string& workspace, const std::vector<FoundFile>& files,
                              const std::string& user, const std::string& run_id,
                              const PublishOptions& options);

}  // namespace sandrun::storage
