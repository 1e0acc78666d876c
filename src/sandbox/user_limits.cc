#include "sandbox/user_limits.h"

#include <algorithm>
#include <cstdio>

#include "sys/syscalls.h"

namespace sandrun::sandbox {
namespace {

constexpr char kUserSysctlDir[] = "/proc/sys/user/";

// What one sandbox could want of a limit (cap) and the least it must get (min). A sandbox's
// namespaces (pid, mount, ipc, uts, net: one each) count in their own share.
struct Bound {
  const char* name;
  int64_t cap;
  int64_t min;
};
constexpr Bound kBounds[] = {
    {"max_inotify_instances", 32, 8}, {"max_inotify_watches", 8192, 1024},
    {"max_fanotify_groups", 8, 1},    {"max_fanotify_marks", 8192, 128},
    {"max_cgroup_namespaces", 8, 1},  {"max_ipc_namespaces", 8, 1},
    {"max_mnt_namespaces", 8, 1},     {"max_net_namespaces", 8, 1},
    {"max_pid_namespaces", 8, 1},     {"max_time_namespaces", 8, 1},
    {"max_user_namespaces", 8, 1},    {"max_uts_namespaces", 8, 1},
};

}  // namespace

std::vector<UserLimitShare> PlanUserLimitShares(const std::map<std::string, int64_t>& host,
                                                int64_t sandboxes) {
  const int64_t shares = std::max<int64_t>(1, sandboxes) + 1;
  std::vector<UserLimitShare> out;
  for (const Bound& b : kBounds) {
    auto it = host.find(b.name);
    if (it == host.end()) continue;  // this kernel has no such limit
    UserLimitShare s;
    s.name = b.name;
    s.host = it->second;
    int64_t each = s.host / shares;
    if (each < b.min) {
      s.raised_to = b.min * shares;
      each = b.min;
    }
    s.share = std::min(b.cap, each);
    out.push_back(s);
  }
  return out;
}

UserSysctls ApplyUserLimitShares(int64_t sandboxes) {
  std::map<std::string, int64_t> host;
  for (const Bound& b : kBounds) {
    auto text = sys::ReadFile(std::string(kUserSysctlDir) + b.name);
    if (!text.ok()) continue;
    try {
      host[b.name] = std::stoll(*text);
    } catch (const std::exception&) {
      continue;
    }
  }
  UserSysctls out;
  std::string summary;
  for (UserLimitShare& s : PlanUserLimitShares(host, sandboxes)) {
    if (s.raised_to > 0) {
      const std::string path = kUserSysctlDir + s.name;
      Status raised = sys::WriteFile(path, std::to_string(s.raised_to) + "\n");
      if (raised.ok()) {
        std::fprintf(stderr,
                     "sandrund: raised %s from %lld to %lld: %lld sandboxes at once "
                     "(max_concurrent_runs + pool + max_kernels) and the sandbox uid's other "
                     "processes need %lld each\n",
                     path.c_str(), static_cast<long long>(s.host),
                     static_cast<long long>(s.raised_to), static_cast<long long>(sandboxes),
                     static_cast<long long>(s.share));
      } else {
        s.share = std::max<int64_t>(1, s.host / (std::max<int64_t>(1, sandboxes) + 1));
        std::fprintf(stderr,
                     "sandrund: WARNING: cannot raise %s to %lld (%s): each sandbox gets "
                     "%lld\n",
                     path.c_str(), static_cast<long long>(s.raised_to),
                     raised.error().message.c_str(), static_cast<long long>(s.share));
      }
    }
    summary += " " + s.name + "=" + std::to_string(s.share);
    out.emplace_back(s.name, std::to_string(s.share));
  }
  std::fprintf(stderr,
               "sandrund: per-sandbox shares of the sandbox uid's limits (%lld sandboxes):%s\n",
               static_cast<long long>(sandboxes), summary.c_str());
  return out;
}

UserSysctls DefaultUserSysctls() {
  return {{"max_inotify_instances", "32"}, {"max_inotify_watches", "8192"}};
}

}  // namespace sandrun::sandbox
