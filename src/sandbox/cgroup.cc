// cgroup v1 and v2 implementations. Only plain file writes; no libcgroup.
#include "sandbox/cgroup.h"

#include <dirent.h>
#include <fcntl.h>        // AT_FDCWD
#include <linux/mount.h>  // FSCONFIG_*, FSPICK_*
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>  // the errno values of sys:: errors (EBUSY, EEXIST, EWOULDBLOCK)
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "sandbox/thaw_watch.h"
#include "sys/syscalls.h"

namespace sandrun::sandbox {

void RunCgroup::ReapExiting() {
  for (pid_t pid : exiting_) (void)sys::Reap(pid);
  exiting_.clear();
}

namespace {

constexpr long kCgroup2SuperMagic = 0x63677270;  // linux/magic.h CGROUP2_SUPER_MAGIC
constexpr char kCgroupRoot[] = "/sys/fs/cgroup";

// The daemon's own path in the hierarchy that has `controller` ("" for v2's "0::" line).
std::string SelfPath(const std::string& controller) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (controller.empty() ? controllers.empty() : false) return path;
    std::stringstream list(controllers);
    std::string item;
    while (std::getline(list, item, ',')) {
      if (!controller.empty() && item == controller) return path;
    }
  }
  return "";
}

Status Write(const std::string& path, const std::string& value) {
  return sys::WriteFile(path, value);
}

int64_t ReadKeyed(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string k;
  int64_t v;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return -1;
}

int64_t ReadNumber(const std::string& path) {
  std::ifstream in(path);
  int64_t v = -1;
  if (!(in >> v)) return -1;
  return v;
}

// What a cgroup no process was ever placed in has counted: nothing (RunCgroup::BaseStats).
CgroupStats NothingCounted() {
  CgroupStats none;
  none.cpu_usage_ms = 0;
  return none;
}

// rmdir, retrying briefly: a cgroup stays busy for a moment after its last task is reaped.
// A missing directory is not an error.
Status RemoveCgroupDir(const std::string& path) {
  Error last;
  for (int attempt = 0; attempt < 50; ++attempt) {
    Status s = sys::RemoveEmptyDir(path);
    if (s.ok()) return s;
    last = s.error();
    if (last.err != EBUSY) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return MakeError(ErrorKind::kSystem, last.message, last.err);
}

// Writes `value` to `file`, then waits (about a second at most) until `done` says the
// freeze took: the kernel freezes a cgroup's tasks asynchronously.
Status WriteAndWait(const std::string& file, const std::string& value,
                    const std::function<bool()>& done) {
  if (Status s = Write(file, value); !s.ok()) return s;
  for (int i = 0; i < 1000; ++i) {
    if (done()) return OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return MakeError(ErrorKind::kSystem, file + ": its processes did not all freeze within 1 s");
}

// Kills every process in the cgroup at `dir` and waits until it is empty (bounded: a run's
// processes are in a pid namespace whose init dies with the first round, taking the rest
// with it, so one or two rounds suffice). cgroup v1 has no cgroup.kill: this is the kill loop
// the kernel docs suggest for v1. A frozen v1 cgroup must be thawed first.
bool KillAll(const std::string& dir) {
  for (int round = 0; round < 200; ++round) {
    auto procs = sys::ReadFile(dir + "/cgroup.procs");
    if (!procs.ok()) return false;
    if (procs->empty()) return true;
    std::istringstream list(*procs);
    pid_t pid;
    while (list >> pid) sys::KillPid(pid);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Removes the run directories below `base` that an earlier daemon of THIS cgroup_name left
// (a crash, a SIGKILL): their processes are killed first, whatever their age.
// Another daemon on the host has its own cgroup_name, hence its own `base`.
int SweepDir(const std::string& base) {
  int removed = 0;
  DIR* dir = ::opendir(base.c_str());
  if (dir == nullptr) return 0;
  while (struct dirent* e = ::readdir(dir)) {
    if (e->d_type != DT_DIR || e->d_name[0] == '.') continue;
    std::string child = base + "/" + e->d_name;
    (void)Write(child + "/cgroup.kill", "1");    // v2, Linux 5.14+; absent on v1
    (void)Write(child + "/cgroup.freeze", "0");  // v2: a kernel left frozen; absent on v1
    if (!KillAll(child)) continue;
    if (RemoveCgroupDir(child).ok()) ++removed;
  }
  ::closedir(dir);
  return removed;
}

// A run's place under the socket cap (socket_cap.h): its directory in the cgroup2 hierarchy
// the programs are attached above, and its slot and cgroup id there. Empty without the cap.
struct CapPlace {
  std::shared_ptr<SocketCap> cap;
  std::string dir;
  SocketCap::Place place;
  bool own_dir = false;  // v1: a directory of its own in the cgroup2 hierarchy, removed here

  // Makes the directory (own_dir) and registers it with the cap `limits` buy.
  static Result<CapPlace> Make(std::shared_ptr<SocketCap> cap, std::string dir, bool own_dir,
                               const CgroupLimits& limits) {
    CapPlace made;
    if (!cap) return made;
    if (own_dir && ::mkdir(dir.c_str(), 0755) != 0) return sys::ErrnoError("mkdir " + dir);
    auto place = cap->Register(dir, SocketShare::For(limits.memory_bytes).cap);
    if (!place.ok()) {
      if (own_dir) ::rmdir(dir.c_str());
      return place.error();
    }
    made.cap = std::move(cap);
    made.dir = std::move(dir);
    made.place = *place;
    made.own_dir = own_dir;
    return made;
  }
  Status SetLimits(const CgroupLimits& limits) const {
    if (!cap) return OkStatus();
    return cap->SetCap(place.slot, SocketShare::For(limits.memory_bytes).cap);
  }
  Status Add(pid_t pid) const {
    if (!cap || !own_dir) return OkStatus();
    return Write(dir + "/cgroup.procs", std::to_string(pid));
  }
  // cgroup2 has no rename: a directory named `name` is made beside this one, mapped to the
  // same slot (the sandbox's count goes on), every process moved there, this one removed.
  Status Rename(const std::string& name) {
    if (!cap || !own_dir) return OkStatus();
    const std::string renamed = dir.substr(0, dir.rfind('/') + 1) + name;
    if (::mkdir(renamed.c_str(), 0755) != 0) return sys::ErrnoError("mkdir " + renamed);
    auto id = cap->Alias(renamed, place.slot);
    if (!id.ok()) {
      ::rmdir(renamed.c_str());
      return id.error();
    }
    Status moved = MoveProcesses(renamed);
    if (!moved.ok()) {  // those moved stay under the slot; the new directory goes at Remove
      cap->Unalias(*id);
      return moved;
    }
    cap->Unalias(place.cgroup_id);
    (void)RemoveCgroupDir(dir);
    dir = renamed;
    place.cgroup_id = *id;
    return OkStatus();
  }
  // After the run's processes are gone.
  Status Remove() {
    if (!cap) return OkStatus();
    cap->Forget(place);
    cap.reset();
    return own_dir ? RemoveCgroupDir(dir) : OkStatus();
  }

 private:
  // Moves every process of `dir` to `to`, again while one forks meanwhile (bounded).
  Status MoveProcesses(const std::string& to) const {
    for (int round = 0; round < 50; ++round) {
      auto procs = sys::ReadFile(dir + "/cgroup.procs");
      if (!procs.ok()) return procs.error();
      if (procs->empty()) return OkStatus();
      std::istringstream list(*procs);
      pid_t pid;
      while (list >> pid) {
        Status s = Write(to + "/cgroup.procs", std::to_string(pid));
        if (!s.ok() && s.error().err != ESRCH) return s;  // ESRCH: it exited meanwhile
      }
    }
    return MakeError(ErrorKind::kSystem, dir + ": its processes kept forking while moved");
  }
};

}  // namespace

Result<sys::UniqueFd> LockCgroupName(const std::string& name) {
  std::string file = name;
  for (char& c : file) {
    if (c == '/') c = '_';
  }
  const std::string path = "/run/sandrun-cgroup-" + file + ".lock";
  auto lock = sys::TryLockFile(path);
  if (lock.ok()) return lock;
  if (lock.error().err != EWOULDBLOCK) {
    std::fprintf(stderr,
                 "sandrund: WARNING: %s: another daemon with cgroup_name '%s' would not be "
                 "noticed\n",
                 lock.error().message.c_str(), name.c_str());
    return sys::UniqueFd();
  }
  return MakeError(ErrorKind::kSystem,
                   "cgroup_name '" + name + "' is in use by another sandrund on this host (" +
                       path +
                       " is locked); its start-up would kill that daemon's runs. Give "
                       "each daemon its own cgroup_name (scripts/serve derives one from its "
                       "state directory)");
}

namespace {

// ---- v1 --------------------------------------------------------------------------------
// One hierarchy of a run's cgroups: its controller, the run's directory there and the
// daemon's own cgroup in it.
struct V1Dir {
  std::string controller;  // "memory", "pids", "cpuacct" or "freezer"
  std::string dir;
  std::string home;
};

// The memory hierarchy's optional files, the same in every run's directory: looked for once
// in the daemon's own (CgroupManagerV1), not per run.
struct V1MemoryFiles {
  bool memsw = false;     // memory.memsw.limit_in_bytes: swap accounting is on
  bool kmem_tcp = false;  // memory.kmem.tcp.limit_in_bytes: CONFIG_MEMCG_V1's socket counter
};

class RunCgroupV1 : public RunCgroup {
 public:
  // memory first, pids second; cpuacct and freezer when the host has them.
  RunCgroupV1(std::vector<V1Dir> dirs, CapPlace cap, V1MemoryFiles files)
      : dirs_(std::move(dirs)), cap_(std::move(cap)), files_(files) {}
  ~RunCgroupV1() override { (void)Destroy(); }
  Status AddProcess(pid_t pid) override {
    placed_ = true;
    for (const auto& d : dirs_) {
      Status s = Write(d.dir + "/cgroup.procs", std::to_string(pid));
      if (!s.ok()) return s;
    }
    return cap_.Add(pid);
  }
  Status AddAfterClone(pid_t pid) override {
    placed_ = true;
    return cap_.Add(pid);
  }
  // "0" in `tasks` is the writing thread itself (cgroup_procs_write_start: a single thread
  // that is current needs no threadgroup lock, hence no RCU grace period).
  Status EnterCallingThread() override {
    placed_ = true;
    for (size_t i = 0; i < dirs_.size(); ++i) {
      Status s = Write(dirs_[i].dir + "/tasks", "0");
      if (!s.ok()) {
        for (size_t j = 0; j < i; ++j) (void)Write(dirs_[j].home + "/tasks", "0");
        return s;
      }
    }
    return OkStatus();
  }
  Status LeaveCallingThread() override {
    Status result = OkStatus();
    for (const auto& d : dirs_) {
      Status s = Write(d.home + "/tasks", "0");
      if (!s.ok()) result = s;
    }
    return result;
  }
  Status SetLimits(const CgroupLimits& limits) override { return ApplyLimits(limits, false); }
  // `fresh`: the cgroup was just made, so its memory limit is the kernel's maximum (not read).
  Status ApplyLimits(const CgroupLimits& limits, bool fresh) {
    const std::string& mem = dirs_[0].dir;
    const std::string memory = std::to_string(limits.memory_bytes);
    // memsw (only with swap accounting) may never be below the memory limit: a lower limit
    // goes to memory first, a higher one to memsw first. Equal limits mean "no swap".
    const bool memsw = files_.memsw;
    const int64_t current = fresh ? -1 : ReadNumber(mem + "/memory.limit_in_bytes");
    const bool raising = current >= 0 && static_cast<uint64_t>(current) < limits.memory_bytes;
    Status s = OkStatus();
    if (memsw && raising) s = Write(mem + "/memory.memsw.limit_in_bytes", memory);
    if (s.ok()) s = Write(mem + "/memory.limit_in_bytes", memory);
    if (s.ok() && memsw && !raising) s = Write(mem + "/memory.memsw.limit_in_bytes", memory);
    // Socket buffers (TCP, and UDP's receive queues) are charged on v1 only to a counter of
    // their own, and only in a cgroup whose kmem.tcp limit was ever set, to sockets made after
    // that: without it a run queued 481 MB in loopback sockets with memory_mb 64. Written before
    // any process is in the cgroup; a second budget the size of memory_mb, apart from
    // memory.limit_in_bytes (v1 never counts socket memory in memory.usage_in_bytes). The
    // kernel charges past it (a socket with empty queues always gets some room): with the
    // socket cap the limit is memory_mb less what the capped sockets can be forced to hold.
    const std::string tcp = mem + "/memory.kmem.tcp.limit_in_bytes";  // absent: no CONFIG_MEMCG_V1
    const uint64_t tcp_limit =
        cap_.cap ? SocketShare::For(limits.memory_bytes).tcp_limit_bytes : limits.memory_bytes;
    if (s.ok() && files_.kmem_tcp) s = Write(tcp, std::to_string(tcp_limit));
    if (s.ok()) s = cap_.SetLimits(limits);
    if (s.ok()) s = Write(dirs_[1].dir + "/pids.max", std::to_string(limits.processes));
    return s;
  }
  // The helper's sockets count against the run's socket cap too (its host sockets are the
  // run's connections).
  Status AddMemoryOnly(pid_t pid) override {
    placed_ = true;
    Status s = Write(dirs_[0].dir + "/cgroup.procs", std::to_string(pid));
    return s.ok() ? cap_.Add(pid) : s;
  }
  Status Rename(const std::string& run_id) override {
    for (auto& d : dirs_) {
      std::string renamed = d.dir.substr(0, d.dir.rfind('/') + 1) + run_id;
      if (Status s = sys::Rename(d.dir, renamed); !s.ok()) return s;
      d.dir = std::move(renamed);
    }
    return cap_.Rename(run_id);
  }
  CgroupStats Stats() const override {
    CgroupStats stats;
    stats.oom_kills =
        std::max<int64_t>(0, ReadKeyed(dirs_[0].dir + "/memory.oom_control", "oom_kill"));
    stats.pids_limit_hits = std::max<int64_t>(0, ReadKeyed(dirs_[1].dir + "/pids.events", "max"));
    int64_t peak = ReadNumber(dirs_[0].dir + "/memory.max_usage_in_bytes");
    if (peak >= 0) stats.peak_memory_kb = peak / 1024;
    stats.cpu_usage_ms = CpuUsageMs();
    return stats;
  }
  CgroupStats BaseStats() const override { return placed_ ? Stats() : NothingCounted(); }
  int64_t CpuUsageMs() const override {
    const std::string cpuacct = Dir("cpuacct");
    const int64_t ns = cpuacct.empty() ? -1 : ReadNumber(cpuacct + "/cpuacct.usage");
    return ns >= 0 ? ns / 1'000'000 : -1;
  }
  Status Freeze(bool frozen) override {
    const std::string freezer = Dir("freezer");
    if (freezer.empty()) {
      return MakeError(ErrorKind::kSystem, "cgroup v1: the run's cgroup has no freezer");
    }
    const std::string state = freezer + "/freezer.state";
    if (!frozen) return Write(state, "THAWED");
    Status s = WriteAndWait(state, "FROZEN", [&] {
      auto now = sys::ReadFile(state);
      return now.ok() && now->rfind("FROZEN", 0) == 0;
    });
    if (!s.ok()) (void)Write(state, "THAWED");
    return s;
  }
  Status Destroy() override {
    // A frozen process would neither exit nor die of SIGKILL: thaw, after a SIGKILL to each
    // (pending, taken as it thaws), so nothing of it runs on.
    if (const std::string freezer = Dir("freezer"); !freezer.empty()) {
      if (auto procs = sys::ReadFile(freezer + "/cgroup.procs"); procs.ok()) {
        std::istringstream list(*procs);
        pid_t pid;
        while (list >> pid) sys::KillPid(pid);
      }
      (void)Write(freezer + "/freezer.state", "THAWED");
    }
    ReapExiting();
    // A run's processes are gone by now (its init reaped, the restore helper too); anything
    // left (a helper a failed start did not reap) is killed first, else rmdir fails.
    if (!dirs_.empty()) (void)KillAll(dirs_[0].dir);
    Status result = OkStatus();
    for (const auto& d : dirs_) {
      Status s = RemoveCgroupDir(d.dir);
      if (!s.ok()) result = s;
    }
    dirs_.clear();
    if (Status s = cap_.Remove(); !s.ok()) result = s;
    return result;
  }

 private:
  // The run's directory in the hierarchy of `controller`, or "" without it.
  std::string Dir(const std::string& controller) const {
    for (const auto& d : dirs_) {
      if (d.controller == controller) return d.dir;
    }
    return "";
  }
  std::vector<V1Dir> dirs_;
  CapPlace cap_;  // the cgroup2 directory
  V1MemoryFiles files_;
  bool placed_ = false;  // a process (or the cloning thread) was ever put in
};

class CgroupManagerV1 : public CgroupManager {
 public:
  // `hierarchies[i].dir` is the daemon's base directory (home/name) in that hierarchy.
  // `unified`: the daemon's base directory in the cgroup2 hierarchy, with `cap` attached
  // there (null, and `cap_error` saying why, without the cap).
  CgroupManagerV1(std::vector<V1Dir> hierarchies, std::string unified,
                  std::shared_ptr<SocketCap> cap, std::string cap_error)
      : hierarchies_(std::move(hierarchies)),
        unified_(std::move(unified)),
        cap_(std::move(cap)),
        cap_error_(std::move(cap_error)) {
    const std::string& mem = hierarchies_[0].dir;
    files_.memsw = ::access((mem + "/memory.memsw.limit_in_bytes").c_str(), W_OK) == 0;
    files_.kmem_tcp = ::access((mem + "/memory.kmem.tcp.limit_in_bytes").c_str(), F_OK) == 0;
  }
  // Removes the daemon's own directories when no run is left in them (a clean stop).
  ~CgroupManagerV1() override {
    for (const auto& h : hierarchies_) ::rmdir(h.dir.c_str());
    if (!unified_.empty()) ::rmdir(unified_.c_str());
  }
  std::string socket_cap_error() const override { return cap_error_; }
  std::string version() const override { return "v1"; }
  bool can_freeze() const override { return !freezer_dir().empty(); }
  std::string freezer_dir() const override {
    for (const auto& h : hierarchies_) {
      if (h.controller == "freezer") return h.dir;
    }
    return "";
  }
  Result<std::unique_ptr<RunCgroup>> Create(const std::string& run_id,
                                            const CgroupLimits& limits) override {
    std::vector<V1Dir> dirs;
    for (const auto& h : hierarchies_) {
      if (h.controller == "freezer" && !limits.freezable) continue;
      std::string dir = h.dir + "/" + run_id;
      Status made = sys::MakeDir(dir);
      if (!made.ok() && made.error().err == ENOENT) {
        // The base was removed under us (an operator, another instance's clean stop while we
        // were idle): make it again.
        if (Status s = sys::MakeDir(h.dir); !s.ok() && s.error().err != EEXIST) {
          for (const auto& d : dirs) ::rmdir(d.dir.c_str());
          return MakeError(ErrorKind::kSystem, s.error().message, s.error().err);
        }
        made = sys::MakeDir(dir);
      }
      if (!made.ok()) {
        for (const auto& d : dirs) ::rmdir(d.dir.c_str());
        return MakeError(ErrorKind::kSystem, made.error().message, made.error().err);
      }
      dirs.push_back({h.controller, dir, h.home});
    }
    auto place = CapPlace::Make(cap_, unified_ + "/" + run_id, true, limits);
    if (!place.ok()) {
      for (const auto& d : dirs) ::rmdir(d.dir.c_str());
      return place.error();
    }
    auto cg = std::make_unique<RunCgroupV1>(dirs, std::move(*place), files_);
    (void)Write(dirs[0].dir + "/memory.swappiness", "0");  // refused in some kernels
    if (Status s = cg->ApplyLimits(limits, true); !s.ok()) return s.error();
    return std::unique_ptr<RunCgroup>(std::move(cg));
  }
  int SweepStale() override {
    if (can_freeze()) ThawAll(freezer_dir());  // else their SIGKILL would wait
    int n = 0;
    for (const auto& h : hierarchies_) n += SweepDir(h.dir);
    if (!unified_.empty()) (void)SweepDir(unified_);  // the same runs' cgroup2 directories
    return n;
  }

 private:
  std::vector<V1Dir> hierarchies_;  // memory, pids, [cpuacct], [freezer]
  V1MemoryFiles files_;
  std::string unified_;
  std::shared_ptr<SocketCap> cap_;
  std::string cap_error_;
};

// ---- v2 --------------------------------------------------------------------------------
class RunCgroupV2 : public RunCgroup {
 public:
  RunCgroupV2(std::string dir, CapPlace cap) : dir_(std::move(dir)), cap_(std::move(cap)) {}
  ~RunCgroupV2() override { (void)Destroy(); }
  Status AddAfterClone(pid_t) override { return OkStatus(); }  // never cloned from inside
  Status AddProcess(pid_t pid) override {
    placed_ = true;
    return Write(dir_ + "/cgroup.procs", std::to_string(pid));
  }
  // v2 has one cgroup per process for every controller: the helper counts in pids.max too.
  Status AddMemoryOnly(pid_t pid) override { return AddProcess(pid); }
  Status EnterCallingThread() override {
    return MakeError(ErrorKind::kSystem,
                     "cgroup v2: a thread cannot enter a run's domain cgroup alone");
  }
  Status LeaveCallingThread() override { return OkStatus(); }
  Status Rename(const std::string&) override { return OkStatus(); }
  Status SetLimits(const CgroupLimits& limits) override {
    Status s = Write(dir_ + "/memory.max", std::to_string(limits.memory_bytes));
    if (s.ok()) s = Write(dir_ + "/pids.max", std::to_string(limits.processes));
    if (s.ok()) s = cap_.SetLimits(limits);
    return s;
  }
  CgroupStats Stats() const override {
    CgroupStats stats;
    stats.oom_kills = std::max<int64_t>(0, ReadKeyed(dir_ + "/memory.events", "oom_kill"));
    stats.pids_limit_hits = std::max<int64_t>(0, ReadKeyed(dir_ + "/pids.events", "max"));
    stats.cpu_usage_ms = CpuUsageMs();
    int64_t peak = ReadNumber(dir_ + "/memory.peak");  // Linux 5.19+
    if (peak >= 0) stats.peak_memory_kb = peak / 1024;
    return stats;
  }
  CgroupStats BaseStats() const override { return placed_ ? Stats() : NothingCounted(); }
  int64_t CpuUsageMs() const override {
    const int64_t usec = ReadKeyed(dir_ + "/cpu.stat", "usage_usec");
    return usec >= 0 ? usec / 1000 : -1;
  }
  Status Freeze(bool frozen) override {
    const std::string file = dir_ + "/cgroup.freeze";
    if (!frozen) return Write(file, "0");
    Status s =
        WriteAndWait(file, "1", [&] { return ReadKeyed(dir_ + "/cgroup.events", "frozen") == 1; });
    if (!s.ok()) (void)Write(file, "0");
    return s;
  }
  Status Destroy() override {
    if (!dir_.empty()) {
      (void)Write(dir_ + "/cgroup.kill", "1");  // v2 kills frozen processes too
      (void)Write(dir_ + "/cgroup.freeze", "0");
    }
    ReapExiting();
    if (dir_.empty()) return OkStatus();
    (void)Write(dir_ + "/cgroup.kill", "1");  // Linux 5.14+; the pid namespace is the fallback
    Status s = RemoveCgroupDir(dir_);
    dir_.clear();
    (void)cap_.Remove();
    return s;
  }

 private:
  std::string dir_;
  CapPlace cap_;         // the run's own directory (own_dir false)
  bool placed_ = false;  // a process was ever put in
};

class CgroupManagerV2 : public CgroupManager {
 public:
  CgroupManagerV2(std::string base, std::shared_ptr<SocketCap> cap, std::string cap_error)
      : base_(std::move(base)), cap_(std::move(cap)), cap_error_(std::move(cap_error)) {}
  std::string version() const override { return "v2"; }
  std::string socket_cap_error() const override { return cap_error_; }
  bool can_freeze() const override { return true; }
  std::string freezer_dir() const override { return ""; }
  Result<std::unique_ptr<RunCgroup>> Create(const std::string& run_id,
                                            const CgroupLimits& limits) override {
    std::string dir = base_ + "/runs/" + run_id;
    if (::mkdir(dir.c_str(), 0755) != 0) return sys::ErrnoError("mkdir " + dir);
    auto place = CapPlace::Make(cap_, dir, false, limits);
    if (!place.ok()) {
      ::rmdir(dir.c_str());
      return place.error();
    }
    auto cg = std::make_unique<RunCgroupV2>(dir, std::move(*place));
    Status s = Write(dir + "/memory.swap.max", "0");
    if (s.ok()) s = cg->SetLimits(limits);
    if (!s.ok()) return s.error();
    return std::unique_ptr<RunCgroup>(std::move(cg));
  }
  int SweepStale() override { return SweepDir(base_ + "/runs"); }

 private:
  std::string base_;
  std::shared_ptr<SocketCap> cap_;
  std::string cap_error_;
};

// The socket cap attached to `dir`, or null and `error` saying why.
std::shared_ptr<SocketCap> AttachCap(const std::string& dir, std::string& error) {
  auto cap = SocketCap::Attach(dir);
  if (cap.ok()) return *cap;
  error = cap.error().message;
  return nullptr;
}

Result<std::unique_ptr<CgroupManager>> DetectV2(const std::string& name) {
  // The "no internal processes" rule: controllers can be enabled for children only of a
  // cgroup without processes, so the daemon moves itself into <base>/daemon first.
  std::string self = SelfPath("");
  std::string base = std::string(kCgroupRoot) + (self == "/" ? "" : self);
  if (base.size() > 7 && base.substr(base.size() - 7) == "/daemon") {
    base = base.substr(0, base.size() - 7);  // already moved (restart inside the unit)
  } else {
    base += "/" + name;
  }
  auto controllers = sys::ReadFile(base.substr(0, base.rfind('/')) + "/cgroup.controllers");
  if (!controllers.ok() || controllers->find("memory") == std::string::npos ||
      controllers->find("pids") == std::string::npos) {
    return MakeError(ErrorKind::kSystem,
                     "cgroup v2: memory and pids controllers are not delegated to " +
                         base.substr(0, base.rfind('/')) + " (systemd: Delegate=yes in the unit)");
  }
  Status s = sys::MakeDirs(base + "/daemon");
  if (s.ok()) s = Write(base + "/daemon/cgroup.procs", std::to_string(::getpid()));
  if (s.ok()) s = Write(base + "/cgroup.subtree_control", "+memory +pids +cpu");
  if (!s.ok()) s = Write(base + "/cgroup.subtree_control", "+memory +pids");
  if (s.ok()) s = sys::MakeDirs(base + "/runs");
  if (s.ok()) s = Write(base + "/runs/cgroup.subtree_control", "+memory +pids");
  if (!s.ok()) return MakeError(ErrorKind::kSystem, "cgroup v2: " + s.error().message);
  std::string cap_error;
  auto cap = AttachCap(base + "/runs", cap_error);
  return std::unique_ptr<CgroupManager>(
      std::make_unique<CgroupManagerV2>(base, std::move(cap), std::move(cap_error)));
}

Result<std::unique_ptr<CgroupManager>> DetectV1(const std::string& name) {
  std::vector<V1Dir> hierarchies;
  for (const char* controller : {"memory", "pids", "cpuacct", "freezer"}) {
    std::string mount = std::string(kCgroupRoot) + "/" + controller;
    const bool required =
        std::strcmp(controller, "memory") == 0 || std::strcmp(controller, "pids") == 0;
    struct stat st;
    if (::stat((mount + "/cgroup.procs").c_str(), &st) != 0) {
      // cpuacct: usage from rusage then; freezer: no stateful runs (Service::CheckStateful).
      if (!required) continue;
      return MakeError(ErrorKind::kSystem,
                       std::string("cgroup v1: no ") + controller + " hierarchy at " + mount);
    }
    std::string self = SelfPath(controller);
    std::string home = mount + (self == "/" ? "" : self);
    std::string base = home + "/" + name;
    if (Status s = sys::MakeDir(base); !s.ok() && s.error().err != EEXIST) {
      if (!required) continue;
      return MakeError(ErrorKind::kSystem, "cgroup v1: " + s.error().message, s.error().err);
    }
    hierarchies.push_back({controller, base, home});
  }
  // The socket cap's cgroup2 directories: the hybrid layout's cgroup2 mount (no controllers
  // needed: the cap is BPF on cgroup2 alone).
  std::string unified, cap_error;
  std::shared_ptr<SocketCap> cap;
  const std::string mount = std::string(kCgroupRoot) + "/unified";
  struct statfs fs;
  if (::statfs(mount.c_str(), &fs) != 0 || fs.f_type != kCgroup2SuperMagic) {
    cap_error = "no cgroup2 hierarchy at " + mount + " (the socket cap needs one)";
  } else {
    const std::string self = SelfPath("");
    unified = mount + (self == "/" ? "" : self) + "/" + name;
    if (Status s = sys::MakeDir(unified); !s.ok() && s.error().err != EEXIST) {
      cap_error = s.error().message;
      unified.clear();
    } else {
      cap = AttachCap(unified, cap_error);
    }
  }
  return std::unique_ptr<CgroupManager>(std::make_unique<CgroupManagerV1>(
      hierarchies, std::move(unified), std::move(cap), std::move(cap_error)));
}

}  // namespace

Result<std::unique_ptr<CgroupManager>> DetectCgroups(const std::string& name) {
  struct statfs fs;
  if (::statfs(kCgroupRoot, &fs) == 0 && fs.f_type == kCgroup2SuperMagic) {
    return DetectV2(name);
  }
  auto v1 = DetectV1(name);
  if (v1.ok()) return v1;
  return MakeError(ErrorKind::kSystem, "no usable cgroups: " + v1.error().message);
}

namespace {

// The super options of the cgroup2 mount at `mount` (mountinfo's last field: "rw,nsdelegate,
// ..."), or an error when none is mounted there.
Result<std::string> Cgroup2SuperOptions(const std::string& mount) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // "ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER_OPTIONS"
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    fields >> id >> parent >> dev >> root >> point;
    const size_t dash = line.find(" - ");
    if (point != mount || dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string type, source, options;
    tail >> type >> source >> options;
    if (type == "cgroup2") return options;
  }
  return MakeError(ErrorKind::kSystem, "no cgroup2 hierarchy mounted at " + mount);
}

}  // namespace

Result<bool> FavorDynamicModifications() {
  struct statfs fs;
  const std::string mount = ::statfs(kCgroupRoot, &fs) == 0 && fs.f_type == kCgroup2SuperMagic
                                ? std::string(kCgroupRoot)
                                : std::string(kCgroupRoot) + "/unified";
  auto options = Cgroup2SuperOptions(mount);
  if (!options.ok()) return options.error();
  if (("," + *options + ",").find(",favordynmods,") != std::string::npos) return false;
  // A reconfiguration sets every root option anew: the ones it has are passed along.
  sys::UniqueFd context(static_cast<int>(
      ::syscall(SYS_fspick, AT_FDCWD, mount.c_str(), FSPICK_CLOEXEC | FSPICK_NO_AUTOMOUNT)));
  if (!context.valid()) return sys::ErrnoError("fspick " + mount);
  std::istringstream list(*options + ",favordynmods");
  std::string option;
  while (std::getline(list, option, ',')) {
    if (option.empty() || option == "rw" || option == "ro") continue;
    if (::syscall(SYS_fsconfig, context.get(), FSCONFIG_SET_FLAG, option.c_str(), nullptr, 0) !=
        0) {
      return sys::ErrnoError("cgroup2 option " + option +
                             " (a kernel before 6.0 has no "
                             "favordynmods)");
    }
  }
  if (::syscall(SYS_fsconfig, context.get(), FSCONFIG_CMD_RECONFIGURE, nullptr, nullptr, 0) != 0) {
    return sys::ErrnoError("reconfigure " + mount);
  }
  // Only the host's cgroup namespace changes the root's options (else silently nothing).
  auto after = Cgroup2SuperOptions(mount);
  if (!after.ok() || ("," + *after + ",").find(",favordynmods,") == std::string::npos) {
    return MakeError(ErrorKind::kSystem,
                     "favordynmods of " + mount + " did not take (a cgroup namespace?)");
  }
  return true;
}

}  // namespace sandrun::sandbox
