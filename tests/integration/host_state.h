// What a stack's runs may leave on the host, counted from /proc, /sys/fs/cgroup and the
// state directory: the integration tests compare these before and after runs. The warm
// pool's sandboxes (named pool-<hex> on the host until a run takes one) are not a
// run's: every count here leaves them out (their daemon fds aside: WaitForWarmPool first).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace sandrun::integration {

// Processes owned by the stack's sandbox host uids (the user and the sandbox's root).
int SandboxProcessCount();
// Run cgroup directories below the stack's cgroup directory, in every hierarchy (v1 or v2).
std::vector<std::string> RunCgroupDirs();
// Run cgroups left below the stack's cgroup directory (v1 or v2): RunCgroupDirs().size().
int LeftoverRunCgroups();
// Entries of <state>/runs (one per run in flight).
int RunDirCount();
// Mounts below <state>/runs in this mount namespace (the root template's aside).
int RunMountCount();
// Waits (up to `seconds`) until the warm pool is full and idle (/healthz "pool": every
// language ready == size, none refilling) and no run's directory, mount, cgroup or process
// is left (a run's teardown follows its response). Returns whether both happened in time.
bool WaitForQuietHost(double seconds = 20);
// Waits (up to `seconds`) until the warm pool is full and idle (every language ready == size,
// none refilling). Returns whether that happened in time.
bool WaitForWarmPoolFull(double seconds);
// Waits (up to `seconds`) until no run's directory, mount, cgroup or process is left, the warm
// pool's aside. Returns whether that happened in time.
bool WaitForRunsGone(double seconds);
// sandrun_pool_hits_total from /metrics: runs a warm sandbox served, of `language` or of
// every language ("" ); -1 when /metrics does not say.
int64_t WarmPoolHits(const std::string& language = "");
// What the pools hold on the host (named pool-<...>: the warm pool's sandboxes, the kernel
// pool's kernels, pool-k-<hex>), which every count above leaves out; those named
// `prefix`<...> only.
struct PoolCounts {
  int processes = 0;  // of the sandbox uids, in a pool's cgroup
  int cgroups = 0;    // below the stack's cgroup directory, every hierarchy
  int dirs = 0;       // in <state>/runs
  int mounts = 0;     // below <state>/runs
  int total() const { return processes + cgroups + dirs + mounts; }
};
PoolCounts CountPoolThings(const std::string& prefix = "pool-");
// The kernel pool's (src/kernel/kernel_pool.h kPoolKernelPrefix).
inline constexpr char kKernelPoolPrefix[] = "pool-k-";
// /healthz member `object`'s `key` (an integer, or a bool as 0/1); -1 when absent or when
// /healthz cannot be read. KernelPoolStat and NetNamespaceCount name their object.
int64_t HealthzCount(const char* object, const char* key);
// /healthz "kernel_pool" member `key`.
int64_t KernelPoolStat(const char* key);
// Waits (up to 60 s: a kernel boots in 1-5 s on a busy machine) until the kernel pool is
// full; fails the test (BOOST_REQUIRE) when it is not.
void WaitForKernelPoolFull();
// Open file descriptors of the stack's sandrund; -1 if it cannot be found.
int DaemonFdCount();
// A count of /healthz "net_namespaces" (sandbox/net_namespace_pool.h: "hits", "recycled",
// "reused", "discarded", "kept": each an fd of the daemon's, "checking").
int64_t NetNamespaceCount(const char* field);
// Paths owned by the sandbox's host uids in /tmp, /var/tmp, /dev/shm, /run (top level only:
// other stacks' state dirs live there) and below <state>/runs.
std::set<std::string> SandboxOwnedOutsideWorkspace();

}  // namespace sandrun::integration
