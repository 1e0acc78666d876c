// The engine's request and result (docs/DESIGN.md §2): a run as decoded from POST /run
// (api/run_codec.h decodes the JSON into RunRequest and encodes RunResponse), and what it
// produced. Data only; knows nothing of HTTP or JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "run/displays.h"
#include "run/event_sink.h"
#include "storage/artifact_store.h"

namespace sandrun::run {

// One program to run, from `code`, one of `snippets`, or a block of `markdown`.
struct CodeStep {
  const config::Language* language = nullptr;
  std::string code;
  int block_index = -1;  // with markdown: the block it came from
  std::string save_as;   // non-empty: write `code` to this workspace path instead of running
  std::string title;     // header line in the joined output, e.g. "snippet 2 (bash)"
  bool install = false;  // a markdown install step (pip install ...): the install budget
  // With markdown: what of the step visibly reads stdin ("input() on line 4 of block 2"),
  // "" when nothing does (markdown::Step::reads_stdin).
  std::string reads_stdin;
};

// An input file placed in the workspace before the run.
struct InputFile {
  std::string path;     // validated: relative, no "..", no NUL, bounded length
  std::string content;  // decoded bytes
};

struct RunRequest {
  std::vector<CodeStep> steps;  // from `code` (one) or `snippets`; empty with `markdown`
  std::optional<std::string> markdown;
  int block = -1;  // with markdown: only this block
  bool continue_on_error = false;
  std::string stdin_data;  // given to StdinStep (run_steps.h)
  std::vector<InputFile> files;
  std::string user = "anonymous";
  bool user_named = false;  // `user` or X-Sandrun-User was given (access.h: token binding)
  std::string session;      // "" = fresh workspace
  bool stateful = false;    // run the Python in the session's live kernel
  // `notebook`: the run's Python blocks share one interpreter (a kernel of the run's own,
  // notebook_run.cc). Unset: on for `markdown`, off for `snippets` (DESIGN.md).
  std::optional<bool> notebook;
  config::Limits limits;  // defaults, lowered or raised (up to the ceilings) by the request
  // Outbound network for this run: the request's "network" under config network
  // "on_request", always under "always"; a request for it under "off" is refused (403).
  bool network = false;
  // `packages`: canonical requirement texts, sorted (run/requirements.h);
  // empty = none asked.
  std::vector<std::string> packages;
  // Set by the run handler when a prepared environment goes with the run (environments.cc):
  // its host directory, mounted read-only on the import path, and the set it was built from
  // (canonical requirement texts).
  std::string environment_dir;
  std::string environment_id;
  std::vector<std::string> environment_packages;
  // Set by the HTTP edge: the base URL of the run's download links (the request's host, or
  // config public_url).
  std::string public_base_url;
  // A streamed run's events (run/event_sink.h): each step's start, output and end; null for a
  // plain run. Not owned.
  EventSink* events = nullptr;
};

// The status of a run or of one of its steps (DESIGN.md §2). A string only where it leaves
// the daemon: the JSON (EncodeRunResponse), the metrics and the log line (RunStatusName). A
// sandbox that could not be built is not a status but an Error (a 500 sandbox_error).
enum class RunStatus {
  kOk,           // every program exited 0
  kError,        // a program exited non-zero (or hit the process limit)
  kKilled,       // a program was killed by a signal that is not ours
  kTimeout,      // the wall-clock or CPU time limit (or the run's time budget was spent)
  kMemoryLimit,  // the OOM killer acted
  kOutputLimit,  // stdout + stderr passed output_bytes (or the budget was spent)
  kFileLimit,    // the generated files did not fit the quota, or could not be saved
};

// "ok", "error", "killed", "timeout", "memory_limit", "output_limit", "file_limit". Pure.
const char* RunStatusName(RunStatus status);

// For test and log output.
template <typename Stream>
Stream& operator<<(Stream& out, RunStatus status) {
  out << RunStatusName(status);
  return out;
}

struct StreamResult {
  std::string text;  // raw bytes; encoded with invalid UTF-8 replaced by U+FFFD
  bool truncated = false;
};

// The outcome of one step (snippet or markdown block).
struct StepResult {
  int index = 0;
  std::string language;
  std::string code;  // what ran (an addition to DESIGN.md §2: clients show it beside the output)
  RunStatus status = RunStatus::kOk;
  std::optional<int> exit_code;
  std::optional<int> signal;
  StreamResult stdout_stream;
  StreamResult stderr_stream;
  int64_t wall_ms = 0;
  std::string budget;  // "install" (install_wall_time_s) or "program" (the run's limits)
};

// The prepared environment of a run (`environment` in the response).
struct EnvironmentReport {
  std::string id;
  std::vector<std::string> packages;  // canonical requirement texts
  std::string status;                 // built, cached or failed
  int64_t build_ms = 0;               // how long its build took (when it was built)
};

// One block of a markdown message in the run plan (DESIGN.md §5).
struct PlanEntry {
  int index = 0;
  std::string language;
  bool run = false;
  std::string reason;
};

// After the run (DESIGN.md §5): a plan entry that was to run but did not, because an earlier
// block failed or the run's time or output budget was spent, gets `run: false` and a reason
// that says why, e.g. "not run: block 1 failed (error); planned: main code" (blocks counted from
// 1), so that `plan` tells what ran. `steps` are the request's, `ran` the response's (one per
// program step that ran, `index` its block), `run_status` the response's status. Pure.
void MarkBlocksNotRun(const std::vector<CodeStep>& steps, const std::vector<StepResult>& ran,
                      RunStatus run_status, std::vector<PlanEntry>* plan);

// `kernel` of a stateful run's response.
struct KernelInfo {
  // "kept" (the session's kernel ran the code), "started" (its first kernel), "restarted"
  // (a new kernel: the previous one died, was stopped at a limit, ended idle or evicted).
  std::string status;
  int execution_count = 0;  // IPython's counter of the cell that ran (the last one)
  // This run ended the kernel (stopped at a limit it could not be interrupted from, or it
  // died): the next run of the session gets a new one, status "restarted".
  bool ended = false;
};

struct RunResponse {
  std::string id;
  RunStatus status = RunStatus::kOk;
  std::optional<int> exit_code;
  std::optional<int> signal;
  StreamResult stdout_stream;
  StreamResult stderr_stream;
  std::vector<storage::ArtifactFile> files;
  std::vector<storage::SkippedFile> files_skipped;
  int64_t wall_ms = 0;
  int64_t cpu_ms = 0;
  int64_t max_rss_kb = 0;
  // With the network: bytes of IP packets received and sent, all steps together.
  std::optional<int64_t> net_rx_bytes, net_tx_bytes;
  config::Limits limits;
  std::optional<std::vector<StepResult>> steps;  // `snippets` in JSON: with snippets/markdown
  std::optional<std::vector<PlanEntry>> plan;    // with markdown
  std::vector<Display> displays;                 // rich outputs in order (displays.h)
  std::optional<EnvironmentReport> environment;  // with `packages`, or an install it covered
  std::optional<KernelInfo> kernel;              // with stateful
  // With a session only: true when the client said the session had runs before
  // (X-Sandrun-Session-Seen: 1) but this node had none of it, so the run started afresh
  // (another node held it, or it expired). See api/session_continuity.h.
  std::optional<bool> session_restarted;
};

// The `plan` array of an answer as JSON: the plan event of a streamed run, and the answer's
// `plan` (api/run_codec.cc writes this text). Pure.
std::string EncodePlanJson(const std::vector<PlanEntry>& plan);

// Bounds on an input file's path (DESIGN.md §8: hostile names never escape).
constexpr size_t kMaxInputPathBytes = 1024;
constexpr size_t kMaxInputNameBytes = 255;

// Checks a workspace-relative path given by a client (an input file's path): relative,
// '/'-separated, no empty, "." or ".." segment, no NUL, no control characters, segments of at
// most kMaxInputNameBytes and a whole of at most kMaxInputPathBytes, not under ".sandrun/".
// Returns "" when valid, else why not.
std::string CheckRelativePath(const std::string& path);

}  // namespace sandrun::run
