#include "host_state.h"

#include <dirent.h>
#include <rapidjson/document.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>
#include <vector>

#include "helpers.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

bool IsSandboxUid(uid_t uid) {
  const uid_t base = Stack::Get().sandbox_uid();  // +1 is the sandbox's root
  return uid == base || uid == base + 1;
}

void FindSandboxOwned(const std::string& dir, int depth, std::vector<std::string>* out) {
  if (depth < 0) return;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::string path = dir + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) continue;
    if (IsSandboxUid(st.st_uid)) out->push_back(path);
    if (S_ISDIR(st.st_mode)) FindSandboxOwned(path, depth - 1, out);
  }
  ::closedir(d);
}

// The warm pool's directories and cgroups (api/warm_start.cc kWarmPrefix).
constexpr char kPoolPrefix[] = "pool-";
// The daemon's root template in the runs directory (main.cc kRootTemplateDir): its mounts and
// files (the sandbox root's) are there while the daemon runs, for every run.
constexpr char kRootTemplateDir[] = ".root-template";

bool IsPoolName(const std::string& name) { return name.rfind(kPoolPrefix, 0) == 0; }

// Whether process `pid` sits in a pool's cgroup (named `prefix`<...>).
bool InPoolCgroup(const std::string& pid, const std::string& prefix = kPoolPrefix) {
  std::ifstream cgroups("/proc/" + pid + "/cgroup");
  std::string line;
  while (std::getline(cgroups, line)) {
    if (line.find("/" + prefix) != std::string::npos) return true;
  }
  return false;
}

// An emptied run directory the daemon keeps for a next run (src/run/run_dir.cc SpareDirs):
// named spare-*, its only entry an empty "fs". Not a leftover; one holding more is.
bool IsEmptySpare(const std::string& dir, const std::string& name) {
  if (name.rfind("spare-", 0) != 0) return false;
  std::error_code error;
  std::vector<std::string> inside;
  for (std::filesystem::recursive_directory_iterator it(dir + "/" + name, error), end;
       !error && it != end; it.increment(error)) {
    inside.push_back(it->path().filename().string());
  }
  return !error && inside == std::vector<std::string>{"fs"};
}

int CountEntries(const std::string& dir) {
  int n = 0;
  DIR* d = ::opendir(dir.c_str());
  while (struct dirent* e = d ? ::readdir(d) : nullptr) {
    if (e->d_name[0] != '.' && !IsPoolName(e->d_name) && !IsEmptySpare(dir, e->d_name)) ++n;
  }
  if (d) ::closedir(d);
  return n;
}

}  // namespace

int SandboxProcessCount() {
  int n = 0;
  DIR* proc = ::opendir("/proc");
  while (struct dirent* e = ::readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    struct stat st;
    if (::stat((std::string("/proc/") + e->d_name).c_str(), &st) != 0) continue;
    if (IsSandboxUid(st.st_uid) && !InPoolCgroup(e->d_name)) ++n;
  }
  ::closedir(proc);
  return n;
}

std::vector<std::string> RunCgroupDirs() {
  std::vector<std::string> out;
  std::function<void(const std::string&, int, bool)> walk = [&](const std::string& dir, int depth,
                                                                bool inside) {
    if (depth < 0) return;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return;
    while (struct dirent* e = ::readdir(d)) {
      if (e->d_type != DT_DIR || e->d_name[0] == '.') continue;
      const std::string name = e->d_name;
      // v2 keeps "daemon" and "runs" below the stack's directory; everything else is a run.
      if (inside && name != "daemon" && name != "runs" && !IsPoolName(name)) {
        out.push_back(dir + "/" + name);
      }
      walk(dir + "/" + name, depth - 1, inside || name == Stack::Get().cgroup_name());
    }
    ::closedir(d);
  };
  walk("/sys/fs/cgroup", 6, false);
  return out;
}

int LeftoverRunCgroups() { return static_cast<int>(RunCgroupDirs().size()); }

PoolCounts CountPoolThings(const std::string& prefix) {
  auto named = [&](const std::string& name) { return name.rfind(prefix, 0) == 0; };
  PoolCounts counts;
  DIR* proc = ::opendir("/proc");
  while (struct dirent* e = proc ? ::readdir(proc) : nullptr) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    struct stat st;
    if (::stat((std::string("/proc/") + e->d_name).c_str(), &st) != 0) continue;
    if (IsSandboxUid(st.st_uid) && InPoolCgroup(e->d_name, prefix)) ++counts.processes;
  }
  if (proc) ::closedir(proc);
  std::function<void(const std::string&, int, bool)> walk = [&](const std::string& dir, int depth,
                                                                bool inside) {
    DIR* d = depth < 0 ? nullptr : ::opendir(dir.c_str());
    while (struct dirent* e = d ? ::readdir(d) : nullptr) {
      if (e->d_type != DT_DIR || e->d_name[0] == '.') continue;
      if (inside && named(e->d_name)) ++counts.cgroups;
      walk(dir + "/" + e->d_name, depth - 1, inside || e->d_name == Stack::Get().cgroup_name());
    }
    if (d) ::closedir(d);
  };
  walk("/sys/fs/cgroup", 6, false);
  const std::string runs = Stack::Get().state_dir() + "/runs";
  DIR* d = ::opendir(runs.c_str());
  while (struct dirent* e = d ? ::readdir(d) : nullptr) {
    if (named(e->d_name)) ++counts.dirs;
  }
  if (d) ::closedir(d);
  std::ifstream mounts("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mounts, line)) {
    if (line.find(runs + "/" + prefix) != std::string::npos) ++counts.mounts;
  }
  return counts;
}

int RunDirCount() { return CountEntries(Stack::Get().state_dir() + "/runs"); }

int RunMountCount() {
  std::ifstream mounts("/proc/self/mountinfo");
  std::string line;
  int n = 0;
  while (std::getline(mounts, line)) {
    if (line.find(Stack::Get().state_dir() + "/runs/") != std::string::npos &&
        line.find(Stack::Get().state_dir() + "/runs/" + kPoolPrefix) == std::string::npos &&
        line.find(Stack::Get().state_dir() + "/runs/" + kRootTemplateDir + "/") ==
            std::string::npos) {
      ++n;
    }
  }
  return n;
}

int DaemonFdCount() {
  const std::string config_arg = Stack::Get().state_dir() + "/sandrun.jsonc";
  for (const auto& [pid, argv] : ProcessArgvs()) {
    for (size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == "--config" && argv[i + 1] == config_arg &&
          argv[0].find("sandrund") != std::string::npos) {
        return CountEntries("/proc/" + std::to_string(pid) + "/fd");
      }
    }
  }
  return -1;
}

std::set<std::string> SandboxOwnedOutsideWorkspace() {
  std::vector<std::string> owned;
  for (const char* dir : {"/tmp", "/var/tmp", "/dev/shm", "/run"}) FindSandboxOwned(dir, 0, &owned);
  FindSandboxOwned(Stack::Get().state_dir() + "/runs", 3, &owned);
  std::set<std::string> out;
  const std::string pool = Stack::Get().state_dir() + "/runs/" + kPoolPrefix;
  const std::string root_template = Stack::Get().state_dir() + "/runs/" + kRootTemplateDir;
  for (auto& path : owned) {
    if (path.rfind(pool, 0) != 0 && path.rfind(root_template, 0) != 0) {
      out.insert(std::move(path));
    }
  }
  return out;
}

int64_t HealthzCount(const char* object, const char* key) {
  rapidjson::Document doc;
  doc.Parse(Get("/healthz").body.c_str());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember(object)) return -1;
  const rapidjson::Value& member = doc[object];
  if (!member.IsObject() || !member.HasMember(key)) return -1;
  if (member[key].IsBool()) return member[key].GetBool() ? 1 : 0;
  return member[key].IsInt64() ? member[key].GetInt64() : -1;
}

int64_t KernelPoolStat(const char* key) { return HealthzCount("kernel_pool", key); }

void WaitForKernelPoolFull() {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (KernelPoolStat("ready") < KernelPoolStat("size") &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  BOOST_TEST_REQUIRE(KernelPoolStat("ready") == KernelPoolStat("size"),
                     "the kernel pool did not fill in 60 s: " << Get("/healthz").body);
}

int64_t WarmPoolHits(const std::string& language) {
  const std::string body = Get("/metrics").body;
  const std::string key = "sandrun_pool_hits_total{language=\"";
  int64_t total = -1;
  for (size_t at = body.find(key); at != std::string::npos; at = body.find(key, at + 1)) {
    const size_t name_end = body.find('"', at + key.size());
    const size_t value = body.find(' ', name_end);
    if (name_end == std::string::npos || value == std::string::npos) break;
    if (!language.empty() && body.compare(at + key.size(), name_end - at - key.size(), language))
      continue;
    total = std::max<int64_t>(total, 0) + std::stoll(body.substr(value + 1));
  }
  return total;
}

namespace {

// No run's directory, workspace mount, cgroup or process is left (the pool's aside).
bool RunsGone() {
  return RunDirCount() == 0 && RunMountCount() == 0 && LeftoverRunCgroups() == 0 &&
         SandboxProcessCount() == 0;
}

// Polls `done` every 20 ms for up to `seconds`; whether it held in time.
bool PollUntil(const std::function<bool()>& done, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace

bool WaitForRunsGone(double seconds) { return PollUntil(RunsGone, seconds); }

namespace {

bool WarmPoolFull() {
  HttpResponse health = Get("/healthz");
  rapidjson::Document doc;
  doc.Parse(health.body.c_str());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("pool")) return false;
  for (const auto& language : doc["pool"].GetObject()) {
    const auto& p = language.value;
    if (p["ready"].GetInt64() != p["size"].GetInt64() || p["refilling"].GetBool()) return false;
  }
  return true;
}

}  // namespace

bool WaitForWarmPoolFull(double seconds) { return PollUntil(WarmPoolFull, seconds); }

int64_t NetNamespaceCount(const char* field) { return HealthzCount("net_namespaces", field); }

bool WaitForQuietHost(double seconds) {
  return PollUntil(
      [] { return WarmPoolFull() && RunsGone() && NetNamespaceCount("checking") == 0; }, seconds);
}

}  // namespace sandrun::integration
