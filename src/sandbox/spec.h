// SandboxSpec: everything one sandboxed program run needs, as plain values. Knows nothing of
// JSON or HTTP (docs/STYLE.md layout rule).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sandrun::sandbox {

// Where SandboxSpec::outputs_dir is inside the sandbox.
inline constexpr char kOutputsInside[] = "/run/sandrun/outputs";
// Where SandboxSpec::environment_dir is inside the sandbox (read-only).
inline constexpr char kEnvironmentInside[] = "/run/sandrun/env";

// The request limits have no numbers of their own here: 0 until the caller sets them (api/
// from the run's config::Limits, whose defaults are the one table config::LimitKeys()). A
// spec that leaves one at 0 gets a sandbox that can do nothing (no memory, no time).
// What a sandbox's cgroup bounds (cgroup.h writes it). A new cgroup limit (cpu.max, say) is a
// field here, its value in run/sandbox_specs.cc and a write in each backend of cgroup.cc; every
// caller between passes SandboxLimits::cgroup through unchanged.
struct CgroupLimits {
  // memory.max / memory.limit_in_bytes, without swap; on v1 also memory.kmem.tcp.limit_in_bytes
  // (socket buffers, a separate counter there; v2 charges them to memory.max itself), and the
  // cap on live sockets with it (SocketShare::For: the socket buffers' limit plus what the
  // kernel charges past it stay within memory_bytes)
  uint64_t memory_bytes = 0;
  int64_t processes = 0;  // pids.max
  // Create also puts the cgroup under the freezer (v1: the freezer hierarchy, which a run
  // without it does not join; v2: cgroup.freeze is always there), for RunCgroup::Freeze.
  bool freezable = false;
};

struct SandboxLimits {
  int64_t wall_time_ms = 0;      // whole sandbox killed after this
  int64_t cpu_time_s = 0;        // RLIMIT_CPU (and cgroup usage check)
  CgroupLimits cgroup;           // memory (swap 0), pids.max
  uint64_t output_bytes = 0;     // stdout + stderr together; past it the run is stopped
  uint64_t file_size_bytes = 0;  // largest complete file; RLIMIT_FSIZE is RlimitFsizeBytes of it
  uint64_t disk_bytes = 0;       // size= of /tmp and /dev/shm tmpfs
  int64_t open_files = 256;      // RLIMIT_NOFILE (not a request limit)
};

// RLIMIT_FSIZE for a largest complete file of `file_size_bytes`: one 1024-byte block more
// (bash's `ulimit -f` counts in blocks), so a file of exactly file_size_bytes is written
// whole and one that tried to grow past it is cut at a size above the limit, which the export
// then skips as too_large (a file cut at exactly the limit could not be told from a complete
// one). Safe after fork.
constexpr uint64_t kFileSizeSlackBytes = 1024;
constexpr uint64_t RlimitFsizeBytes(uint64_t file_size_bytes) {
  return file_size_bytes + kFileSizeSlackBytes;
}

// Outbound network of a run (network.h): off unless `enabled`.
struct NetworkSpec {
  bool enabled = false;
  // Networks reachable although in a refused range (config network_allow_cidrs), as text.
  std::vector<std::string> allow_cidrs;
  // sandrun-slirp (empty: beside the running executable), and the host ids it runs as
  // (config network_uid): owner of no sandbox and none of their namespaces.
  std::string slirp_path;
  uid_t uid = 64002;
  gid_t gid = 64002;
};

// Who watches a run's output as it comes (a streamed /run, run/event_sink.h), called on the
// supervising thread. The captured streams and the output limit are as without one.
class OutputObserver {
 public:
  // How often Tick() is called at least while the run lives.
  static constexpr int kTickMs = 50;
  virtual ~OutputObserver() = default;
  // Bytes the program wrote on `fd` (1 stdout, 2 stderr), in the order they were read.
  virtual void OnOutput(int fd, std::string_view bytes) = 0;
  // Between reads: false when nobody waits for the run any more (its client went away):
  // the run is then killed.
  virtual bool Tick() = 0;
};

// Which of the launcher's zygotes starts a sandbox (zygote.h): none (the sandbox execs its
// argv), the one of stateless Python runs (config `zygote`), or the one with ipykernel
// imported, for kernels (config `kernel_zygote`).
enum class ZygoteKind { kNone, kRun, kKernel };
inline constexpr int kZygoteKinds = 3;

struct SandboxSpec {
  // Program to execve inside; argv[0] must be an absolute path inside the sandbox.
  std::vector<std::string> argv;
  // Complete environment (nothing of the daemon's leaks in).
  std::vector<std::string> env;
  // Host directory mounted at /home/user (the workspace; /mnt/data is a symlink to it). Must
  // exist and be writable by host_uid.
  std::string workspace_dir;
  // Directories of the workspace (relative) bound read-only over themselves: the program
  // files the launcher wrote. Being mount points, they cannot be renamed or replaced either.
  std::vector<std::string> readonly_workspace_dirs;
  // Host directory mounted writable at kOutputsInside (/run/sandrun/outputs): the run's
  // outputs area, outside the workspace, where shown figures land; "" = none.
  std::string outputs_dir;
  // Host directory bound read-only at kEnvironmentInside: a prepared environment's packages,
  // put on the import path by the caller's env; "" = none.
  std::string environment_dir;
  // Host directory mounted at /tmp (shared by the steps of one run); "" = a fresh tmpfs of
  // limits.disk_bytes.
  std::string tmp_dir;
  // Bytes given on the program's standard input, then EOF.
  std::string stdin_data;
  SandboxLimits limits;
  // Unprivileged host ids the sandbox user (1000:1000 inside) maps to.
  uid_t host_uid = 64000;
  gid_t host_gid = 64000;
  std::string run_id;  // names the cgroup
  // Whom the run is for (its user: the identity its sessions, files and quota belong to): a
  // network namespace made ahead for a run without network goes back to the pool after it
  // and may serve this owner's next run, never another's (net_namespace_pool.h). "": it goes
  // after the run.
  std::string net_owner;
  NetworkSpec network;
  // Sees the output as it is read (a streamed run); null: none. Not owned; outlives the run.
  OutputObserver* observer = nullptr;
  // Start from that zygote (zygote.h) when the launcher has one: argv is then the run's
  // Python's (python3 sandrun_main.py PROGRAM, or python3 -m ipykernel_launcher ... for a
  // kernel), which the zygote goes on as instead of exec'ing it. Without one the sandbox
  // starts as any other.
  ZygoteKind zygote = ZygoteKind::kNone;
};

}  // namespace sandrun::sandbox
