// The files of the Jupyter server's kernels (docs/DESIGN.md, "Additions: the files a Jupyter
// kernel writes"): a kernel's workspace is the user's session "jupyter"; what an execute
// makes or changes there is published as a run's files are (ExportFiles), and the session is
// saved, so that a /run with that session, and the Open WebUI Tool, see the files.
#include <algorithm>
#include <chrono>

#include "run/engine.h"
#include "run/run_steps.h"
#include "util/text.h"

namespace sandrun::run {
namespace {

// `found` encoded as a run keeps stamps, and the latest time among them.
storage::FileStamps Encode(const std::map<std::string, storage::FileStamp>& found,
                           int64_t* latest_ns) {
  storage::FileStamps stamps;
  *latest_ns = 0;
  for (const auto& [path, stamp] : found) {
    stamps[path] = storage::EncodeStamp(stamp);
    *latest_ns = std::max({*latest_ns, stamp.ctime_ns, stamp.mtime_ns});
  }
  return stamps;
}

}  // namespace

std::string Engine::RestoreJupyterWorkspace(const std::string& user, const std::string& workspace,
                                            sandbox::RunCgroup* cgroup) {
  auto locked = sessions_.Lock(user, kJupyterSession, std::chrono::seconds(config_.session_wait_s));
  if (!locked.ok()) return locked.error().message;
  // A new or empty session: nothing to copy (and no helper process to start).
  if (locked->created() || !sessions_.HasFiles(*locked)) return "";
  const config::Limits limits = LiveConfig()->limits;
  storage::FileStamps ignored;
  if (auto refused =
          RestoreSession(*locked, workspace, util::RandomHex(16), limits, cgroup, &ignored)) {
    return refused->message;
  }
  return "";
}

storage::FileStamps Engine::StampJupyterWorkspace(const std::string& workspace) {
  auto found = storage::StampWorkspace(workspace, storage::ExportOptions{});
  if (!found.ok()) return {};
  int64_t latest_ns = 0;
  storage::FileStamps stamps = Encode(*found, &latest_ns);
  storage::WaitPastTimestamp(latest_ns);
  return stamps;
}

Engine::JupyterFiles Engine::ExportJupyterWorkspace(const std::string& public_base_url,
                                                    const std::string& user,
                                                    const std::string& workspace, bool save,
                                                    storage::FileStamps* stamps) {
  JupyterFiles out;
  auto found = storage::StampWorkspace(workspace, storage::ExportOptions{});
  if (!found.ok()) {
    out.notes = "sandrun: the kernel's files could not be listed: " + found.error().message;
    return out;
  }
  int64_t latest_ns = 0;
  storage::FileStamps after = Encode(*found, &latest_ns);
  if (after == *stamps) return out;  // the execute wrote nothing (the common case)
  const auto live = LiveConfig();
  RunRequest run;
  run.user = user;
  run.session = kJupyterSession;
  run.limits = live->limits;
  run.public_base_url = public_base_url;
  RunResponse response;
  response.id = util::RandomHex(16);
  response.status = RunStatus::kOk;
  response.limits = run.limits;
  storage::SessionLock session;
  if (save) {
    auto locked =
        sessions_.Lock(user, kJupyterSession, std::chrono::seconds(config_.session_wait_s));
    if (locked.ok()) {
      session = std::move(*locked);
    } else {
      AppendLine(response.stderr_stream.text, "sandrun: session '" + std::string(kJupyterSession) +
                                                  "' not saved: " + locked.error().message);
    }
  }
  storage::FileStamps before = *stamps;
  response = ExportAndSave(run, *live, workspace, "", &before, session, response).response;
  if (session.held()) {
    kernels_.End(KernelKey(run), "a Jupyter kernel changed the session's files");
  }
  out.files = std::move(response.files);
  out.skipped = std::move(response.files_skipped);
  out.notes = std::move(response.stderr_stream.text);
  *stamps = std::move(after);
  storage::WaitPastTimestamp(latest_ns);
  return out;
}

}  // namespace sandrun::run
