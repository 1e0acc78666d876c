// Per-run cgroups behind one interface, cgroup v2 or v1 (DESIGN.md §3 "Limits").
// Kernel doc: Documentation/admin-guide/cgroup-v2.rst, cgroup-v1/{memory,pids}.rst.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sandbox/socket_cap.h"
#include "sandbox/spec.h"  // CgroupLimits
#include "sys/unique_fd.h"
#include "util/result.h"

namespace sandrun::sandbox {

struct CgroupStats {
  int64_t oom_kills = 0;        // OOM-killer events in the run's cgroup
  int64_t cpu_usage_ms = -1;    // -1 when unknown
  int64_t peak_memory_kb = -1;  // -1 when unknown
  int64_t pids_limit_hits = 0;  // forks refused because the run was at its process limit
};

// One run's cgroup(s). Destroy() removes them; the destructor does too.
class RunCgroup {
 public:
  virtual ~RunCgroup() = default;
  // Moves `pid` into the run's cgroup(s). Errors name the file written.
  virtual Status AddProcess(pid_t pid) = 0;
  // Moves `pid`, a helper of the run (its slirp4netns), into the run's memory cgroup alone:
  // its memory and the socket buffers it makes from then on are charged to the run, and it
  // takes none of the run's pids.max (v1; on v2 a process is in one cgroup for every
  // controller, so it counts there too). Errors name the file written.
  virtual Status AddMemoryOnly(pid_t pid) = 0;
  // Moves the CALLING THREAD alone into the run's cgroup(s), so that a process it then
  // clones starts there and needs no migration (on cgroup v1, moving a process
  // with cgroup.procs waits for an RCU grace period, ~10 ms; a thread writing "0" to `tasks`
  // moves itself without taking the global threadgroup lock, ~0.3 ms). Pair with
  // LeaveCallingThread() right after the clone. On error the thread is where it was.
  // Unsupported (an error) on v2, whose threads cannot sit in a domain cgroup of their own.
  virtual Status EnterCallingThread() = 0;
  // Moves the calling thread back to the daemon's own cgroup(s). Errors name the file.
  virtual Status LeaveCallingThread() = 0;
  // Moves `pid`, cloned by a thread inside the run's cgroups (EnterCallingThread), into the
  // one a thread cannot enter alone: on a v1 host, the run's directory in the cgroup2
  // hierarchy, where the socket cap counts its sockets (socket_cap.h). Call before the
  // process runs the sandbox's code. Errors name the file.
  virtual Status AddAfterClone(pid_t pid) = 0;
  // Writes `limits` (memory, pids.max, the socket cap) again, for a cgroup made ahead of its run
  // (the warm pool). Errors name the file; lowering memory below what is in use fails (EBUSY on
  // v1).
  virtual Status SetLimits(const CgroupLimits& limits) = 0;
  // Renames the cgroup to `run_id` (same parent), its processes staying in it: a warm
  // pool's sandbox takes the id of the run it serves. v1 only (rename(2) of a cgroup
  // directory; the socket cap's cgroup2 directory, which cannot be renamed, is made anew and
  // the processes moved there); v2 has no rename and keeps the name (returns OK). Errors name
  // the directory.
  virtual Status Rename(const std::string& run_id) = 0;
  virtual CgroupStats Stats() const = 0;
  // The counters a process's usage is measured from (launcher.cc Since): Stats(), or, read
  // from no file, zeros while no process was ever placed in the cgroup (a new one has counted
  // nothing yet; its peak memory stays unknown). A wrapper that does not track placements
  // keeps this default.
  virtual CgroupStats BaseStats() const { return Stats(); }
  // The CPU time of the cgroup's processes so far (ms; -1 when unknown), from one file: what
  // the supervision's CPU check reads between polls.
  virtual int64_t CpuUsageMs() const { return Stats().cpu_usage_ms; }
  // Freezes (true) or thaws (false) every process of the cgroup (made with
  // CgroupLimits::freezable): a frozen process takes no CPU and runs no code until thawed.
  // Freezing waits until every process is frozen (at most about a second; else an error and
  // the cgroup is thawed again). On v1 a frozen process does not die of SIGKILL until it is
  // thawed: Destroy and SweepStale thaw first. Errors name the file.
  virtual Status Freeze(bool frozen) = 0;
  // Removes the run's cgroup directories (all processes must be gone). Reaps the processes
  // left to it by ReapLater first. Thaws a frozen cgroup first.
  virtual Status Destroy() = 0;

  // Hands over the reaping of `pid`, a child of the calling process (a sandbox's init that
  // has reported and is exiting: the kernel is tearing its namespaces down). Reaped by
  // ReapExiting(), which the launcher calls before it starts another process in this
  // cgroup (an unreaped init still counts against pids.max) and Destroy() calls first. Not
  // thread-safe: one run's thread uses its cgroup.
  void ReapLater(pid_t pid) { exiting_.push_back(pid); }
  // Waits for (blocking: they are exiting) and reaps the processes handed over by ReapLater.
  void ReapExiting();

 private:
  std::vector<pid_t> exiting_;
};

class CgroupManager {
 public:
  virtual ~CgroupManager() = default;
  virtual std::string version() const = 0;  // "v2" or "v1"
  // Whether cgroups made with CgroupLimits::freezable can be frozen (v1: a freezer hierarchy
  // is mounted; v2: always).
  virtual bool can_freeze() const = 0;
  // v1: the freezer hierarchy's directory holding this daemon's run cgroups; a frozen v1
  // process does not die of SIGKILL until thawed, so whoever outlives the daemon thaws them
  // (thaw_watch.h). "" on v2 (a frozen process dies of SIGKILL) and without a freezer.
  virtual std::string freezer_dir() const = 0;
  // Why the socket cap (socket_cap.h) is off: "" when every run's cgroup has it. Without it
  // a run's socket buffers are bounded only by the kernel's limits (kmem.tcp on v1, which
  // the kernel exceeds by its forced charges per socket).
  virtual std::string socket_cap_error() const = 0;
  // Creates the cgroup of run `run_id` with `limits`. Errors (kSystem) name the
  // directory made or the file written.
  virtual Result<std::unique_ptr<RunCgroup>> Create(const std::string& run_id,
                                                    const CgroupLimits& limits) = 0;
  // Kills the processes of every run cgroup an earlier daemon with the same name left (a
  // crash, SIGKILL), whatever their age, and removes the cgroups. Returns how many. Call
  // before serving: every run cgroup of this name is then a leftover.
  virtual int SweepStale() = 0;
};

// One daemon per cgroup_name on a host: SweepStale kills every run cgroup below the name as
// an earlier daemon's leftovers, so a second daemon with the same name killed the first one's
// runs. Takes an flock(2) on /run/sandrun-cgroup-<name>.lock ('/' in the name as '_'), held by
// the returned fd for the daemon's life (it goes with the process, however it ends). Returns
// an invalid fd when /run has no room for the file (no guard then, with a warning on stderr).
// Errors: kSystem when another process holds the lock, saying what to change.
Result<sys::UniqueFd> LockCgroupName(const std::string& name);

// Detects what the host offers: cgroup v2 with memory and pids controllers delegated to us,
// else v1 memory + pids hierarchies. `name` is the directory created under the daemon's own
// cgroup. Errors (kSystem) say what is missing.
Result<std::unique_ptr<CgroupManager>> DetectCgroups(const std::string& name);

// Turns on the cgroup2 hierarchy's `favordynmods` (kernel 6.0 and later; on v1 hosts, the
// hybrid layout's cgroup2 mount), keeping its other options. Without it, placing a run's
// process into its cgroup (v1 and v2 alike: one global lock) waits for an RCU grace period
// whenever no placement happened in the last one: 7-11 ms of a ~10 ms zygote run measured
// here. The cost the kernel names, a slower path in every fork and exit, was not measurable
// beside it (DESIGN.md "favordynmods"). It is the hierarchy's setting, so the host keeps it
// after the daemon stops. Returns true when this call turned it on, false when it was on.
// Errors (kSystem): no cgroup2 mount, a kernel without the option, a cgroup namespace.
Result<bool> FavorDynamicModifications();

}  // namespace sandrun::sandbox
