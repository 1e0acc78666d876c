// The per-uid limits of user namespaces (/proc/sys/user/*, user_namespaces(7),
// kernel/ucount.c), shared by every sandbox. Every sandbox's user namespace is owned by the
// one sandbox uid (launcher.cc CloneChild), and what a namespace's processes take of such a
// counter (inotify instances and watches, fanotify groups and marks, namespaces) is charged
// at each level up to the host, where the sandbox uid's host limit bounds all sandboxes
// together. So each sandbox gets a share in its own namespace (written by its init before
// the program starts), and the shares of all sandboxes that can exist at once add up to
// less than the host's limit: one user's sandboxes cannot take another user's.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "util/result.h"

namespace sandrun::sandbox {

// name in /proc/sys/user -> the value written in a sandbox's namespace.
using UserSysctls = std::vector<std::pair<std::string, std::string>>;

// One limit's plan: the host's value, what it is raised to (0: left as it is), and the
// share written in each sandbox's namespace.
struct UserLimitShare {
  std::string name;  // the file in /proc/sys/user, e.g. "max_inotify_instances"
  int64_t host = 0;
  int64_t raised_to = 0;
  int64_t share = 0;
};

// The shares for `sandboxes` sandboxes at once, from the host's values `host` (file name ->
// value; names sandrun does not know are left alone). One more share is kept for the sandbox
// uid's other processes (environment builds' helpers). A share is at most the
// limit's cap (what one sandbox could want: 32 inotify instances, ...), and where the host's
// value leaves less than the limit's minimum per share (8 inotify instances, ...) the host's
// value is raised to minimum * (sandboxes + 1). Pure.
std::vector<UserLimitShare> PlanUserLimitShares(const std::map<std::string, int64_t>& host,
                                                int64_t sandboxes);

// Reads /proc/sys/user, raises what PlanUserLimitShares says (a line on stderr for each, and
// a warning when the write fails: the share is then what the host's value leaves, at least
// 1) and returns the per-sandbox values for InitPlan::user_sysctls. Not thread-safe (at
// start-up).
UserSysctls ApplyUserLimitShares(int64_t sandboxes);

// The per-sandbox values used before ApplyUserLimitShares is called (`sandrund check`).
UserSysctls DefaultUserSysctls();

}  // namespace sandrun::sandbox
