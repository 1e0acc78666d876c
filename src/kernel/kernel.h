// One live IPython kernel (Debian python3-ipykernel) in a sandbox of its own
// (Launcher::Start: namespaces, seccomp, rlimits, a cgroup with the memory limit, and the
// network only when its spec asks for it, fixed for the kernel's life), spoken to with the Jupyter
// messaging protocol (jupyter_messaging.h) over ipc sockets with libzmq. The kernel has a directory
// of its own on the host, one tmpfs of limits.disk_bytes like a run's (RunDir in run/run_dir.h):
// its workspace and /tmp persist while it lives.
//
// Between cells the kernel's cgroup is frozen (RunCgroup::Freeze): whatever a cell left
// running (a thread, a setsid'd busy loop) takes no CPU and runs no code until the next cell
// thaws it. Its CPU time is bounded per cell from the cgroup, and only a cell's run holds a
// sandbox slot, so a kernel that could run between cells would be unbounded in both.
//
// The ipc sockets: ipykernel binds them in /tmp/.sandrun-kernel/ (k-1 shell, k-2 iopub,
// k-3 stdin, k-4 control, k-5 heartbeat), a directory the daemon made and holds open.
// Once they are bound the daemon makes the directory root's (0755), checks that each is a
// socket of the sandbox user, and connects through /proc/self/fd/<dir>: the sandboxed
// code can no longer add, remove or replace an entry there, so no path it can change is
// ever resolved by the daemon (libzmq's reconnects included: they find the same sockets).
//
// Not thread-safe: one run uses a kernel at a time (KernelManager leases). Not safe after
// fork.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sandbox/runner.h"
#include "sandbox/spec.h"
#include "sys/unique_fd.h"
#include "util/result.h"

namespace sandrun::kernel {

struct KernelSpec {
  std::vector<std::string> env;  // the sandbox's environment (MPLBACKEND is set by the kernel)
  // memory_bytes, processes, file_size_bytes, disk_bytes, open_files bound the kernel for
  // its whole life; wall and CPU time are per run (ExecuteLimits).
  sandbox::SandboxLimits limits;
  // The kernel's outbound network (slirp4netns and the firewall of a run, network.h), for
  // its whole life: a run of the session that asks otherwise gets a new kernel.
  sandbox::NetworkSpec network;
  uid_t host_uid = 64000;
  gid_t host_gid = 64000;
  std::string python = "/usr/bin/python3";
  int64_t start_timeout_ms = 30'000;  // until the kernel answers kernel_info
  // Files (name, content) written into the kernel's private directory (/tmp/.sandrun-kernel,
  // root's once the kernel has started; readable, never writable, by its code) before it
  // starts. One named setup.py is run by the kernel before the first cell, in a namespace of
  // its own; the others are for it to read (the run's stdin, helpers).
  std::vector<std::pair<std::string, std::string>> setup_files;
  // Started from the launcher's kernel zygote (config `kernel_zygote`) when it has one.
  bool zygote = false;
};

// Bounds of one execute_request.
struct ExecuteLimits {
  int64_t wall_ms = 10'000;         // then interrupt, and kill after kInterruptGraceMs
  int64_t cpu_ms = 10'000;          // CPU time of the kernel's cgroup during the run: likewise
  uint64_t output_bytes = 1 << 20;  // stdout + stderr + display bytes: likewise
};

inline constexpr int64_t kInterruptGraceMs = 2000;

enum class ExecuteStatus {
  kOk,
  kError,        // the code raised (ename/evalue/traceback in stderr)
  kWallTimeout,  // interrupted (or killed) at the wall-clock limit
  kCpuTimeout,   // interrupted (or killed) at the CPU limit
  kMemoryLimit,  // the OOM killer acted in the kernel's cgroup during the run
  kOutputLimit,  // interrupted (or killed) past output_bytes
  kKilled,       // the kernel died otherwise
};

// A rich output (display_data / execute_result), in the order shown.
struct RichOutput {
  std::string kind;   // "image" (bytes), "table" or "text" (text)
  std::string mime;   // image/png, text/markdown, text/html
  std::string text;   // table, text
  std::string bytes;  // image: the decoded file
};

struct ExecuteResult {
  ExecuteStatus status = ExecuteStatus::kOk;
  std::string stdout_text;  // stream "stdout", then text/plain of execute_result in order
  std::string stderr_text;  // stream "stderr"
  // The cell raised: its exception's name and value, and the traceback (ANSI codes
  // stripped); status kError.
  std::string ename, evalue, traceback;
  bool truncated = false;  // output past output_bytes was dropped
  std::vector<RichOutput> displays;
  int execution_count = 0;
  bool interrupted = false;  // an interrupt_request was sent
  bool kernel_lost = false;  // the kernel is gone (killed by us or died): start a new one
  // A message over 16 MiB (ZMQ_MAXMSGSIZE) was dropped with its iopub connection: the cell
  // replied but its idle status never came. Status kOutputLimit; the kernel is ended
  // (kernel_lost), since no later output would come back.
  bool output_lost = false;
  int64_t wall_ms = 0;
  int64_t cpu_ms = 0;
  int64_t max_rss_kb = 0;  // peak memory of the kernel's cgroup since it started
  // With the network: bytes of IP packets received and sent during the run; -1 without.
  int64_t net_rx_bytes = -1;
  int64_t net_tx_bytes = -1;
};

struct CellProgress;  // kernel.cc: one cell as Execute follows it
struct IncomingMessage;

// What ExecuteRelayed tells its caller while a cell runs, on the calling thread.
struct CellRelay {
  // Each message of the cell as it arrives: its iopub messages (status, execute_input,
  // stream, display_data, execute_result, error, ...) and its execute_reply (from shell).
  std::function<void(const IncomingMessage&)> on_message;
  // Asked about every 100 ms: true sends the cell an interrupt_request (once), and the cell
  // is killed as at a limit when it does not end within kInterruptGraceMs.
  std::function<bool()> interrupt_asked;
  // Asked about every 100 ms (optional): true with the content of a client's input_reply to
  // send the kernel on stdin (the cell's input_request came to on_message). Only a request
  // content with allow_stdin true makes ipykernel ask.
  std::function<bool(std::string*)> stdin_reply;
};

// Fills a new kernel's workspace (the session's files) from a process in `cgroup`, the
// kernel's (null without cgroups), so that the files are charged to the kernel's memory.
using Populate = std::function<Status(const std::string& workspace, sandbox::RunCgroup* cgroup)>;

class Kernel {
 public:
  // Makes `dir` (must not exist): a tmpfs of spec.limits.disk_bytes holding the workspace
  // (ws/), /tmp (tmp/) and the socket directory, and root/. `id` names the cgroup.
  // Errors: kSystem, naming the step.
  static Result<std::unique_ptr<Kernel>> Create(std::string dir, std::string id, KernelSpec spec);
  ~Kernel();  // Stop()
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  const std::string& workspace() const { return workspace_; }
  const KernelSpec& spec() const { return spec_; }

  const std::string& id() const { return id_; }

  // Starts the kernel in its sandbox, in `cgroup` (Launcher::CreateCgroup, where the
  // session's files were restored, so they count against the kernel's memory limit; null
  // without cgroups), and connects, waiting until it answers kernel_info_request (at most
  // spec.start_timeout_ms), then freezes it. `cgroup` must be freezable
  // (CgroupLimits::freezable). `zmq_context` is a libzmq context. Errors: kSystem, with
  // what the kernel printed when it ended early, or why it cannot be frozen.
  Status Boot(const sandbox::SandboxRunner& runner, void* zmq_context,
              std::unique_ptr<sandbox::RunCgroup> cgroup);

  // For a kernel booted ahead of its run (the kernel pool, kernel_pool.h): fills its
  // workspace with `populate` while the kernel stays frozen, as it has been since Boot (no
  // code of it runs, so none can race the daemon's writes). The cgroup `populate` gets is a
  // view of the kernel's in which a helper joins the memory cgroup alone (AddMemoryOnly): its
  // files are charged to the kernel, and it is not frozen with it (cgroup v1, where the
  // freezer is a hierarchy of its own). `thaw`: thaw the kernel while `populate` runs and
  // freeze it again after (cgroup v2, where a process in the kernel's cgroup freezes with it;
  // a pooled kernel has run no code but its own start). Errors: `populate`'s, as it returned
  // them; kSystem when the kernel cannot be frozen again (it is then ended).
  Status FillFrozen(const Populate& populate, bool thaw);

  // Moves the kernel's directory to `dir` and renames its cgroup to `id` (cgroup v1; v2
  // keeps the name), for a pooled kernel taking a run's name. Errors: kSystem, naming the
  // rename; what was renamed stays renamed.
  Status Rename(const std::string& dir, const std::string& id);

  // Runs `code` as one cell: thaws the kernel, and freezes it again after the cell (a kernel
  // that does not freeze within a second is ended: kernel_lost). Never fails: what went
  // wrong is in the result. `observer` (optional) sees the cell's stdout and stderr as they
  // come, and is ticked while it runs; when its Tick() says nobody waits, the cell is
  // interrupted (and the kernel ended if that does not end it).
  ExecuteResult Execute(const std::string& code, const ExecuteLimits& limits,
                        sandbox::OutputObserver* observer = nullptr);

  // As Execute, for a client's own execute_request: `request_content` (a JSON object: code,
  // silent, store_history, user_expressions, allow_stdin, stop_on_error) is sent as it is,
  // and `relay` sees the cell's messages as they arrive (a Jupyter server passes them on).
  ExecuteResult ExecuteRelayed(const std::string& request_content, const ExecuteLimits& limits,
                               const CellRelay& relay);

  // The sandbox still runs (Boot succeeded and no run lost it).
  bool alive() const;
  // Reads and drops what the kernel wrote on its own stdout/stderr, so it never blocks.
  void DrainOutput();
  // Between runs: drops the messages the kernel sent (output of code left running in the
  // background), so the daemon never queues more than a second of them.
  void DropMessages();
  // Ends the sandbox and closes the sockets; the directory stays until the destructor.
  void Shutdown();

  // The caller's record of the workspace's files (path -> sha256) as of the last run: the
  // files a run does not change are not exported again.
  std::map<std::string, std::string>& file_digests() { return file_digests_; }

 private:
  Kernel(std::string dir, std::string id, KernelSpec spec);
  // Execute's and ExecuteRelayed's one body: thaws, sends `request_content`, follows the cell
  // (told to `observer` or `relay`, either may be null), freezes again.
  ExecuteResult ExecuteCell(const std::string& request_content, const ExecuteLimits& limits,
                            sandbox::OutputObserver* observer, const CellRelay* relay);
  struct Sockets;
  Status Connect(void* zmq_context);
  Status WaitReady();
  bool Send(void* socket, const std::string& msg_type, const std::string& content,
            std::string* msg_id);
  // Execute's loop: takes the cell's messages (request `id`) until its reply and idle status,
  // interrupting it at a limit and giving up after kInterruptGraceMs (cell.died), or until
  // the sandbox exits (cell.died). `cpu_before_ms`: the cgroup's CPU time at the start.
  void FollowCell(CellProgress& cell, const std::string& id,
                  std::chrono::steady_clock::time_point start, int64_t cpu_before_ms);
  // FollowCell's reading: the cell's messages on iopub, shell (its reply) and stdin (an
  // input_request, for the relay), and the relay's input_replies sent back on stdin.
  void TakeMessages(CellProgress& cell, const std::string& id);

  std::string dir_, id_, workspace_, tmp_;
  KernelSpec spec_;
  bool mounted_ = false;
  sys::UniqueFd socket_dir_;  // tmp/.sandrun-kernel, opened before the sandbox starts
  std::string key_;
  std::string session_id_;
  std::unique_ptr<sandbox::LiveSandbox> sandbox_;
  std::unique_ptr<Sockets> sockets_;
  std::map<std::string, std::string> file_digests_;
};

}  // namespace sandrun::kernel
