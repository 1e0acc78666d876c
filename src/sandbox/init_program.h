// The program's side of a sandbox's start, shared by sandrun-init (init_main.cc), which
// execs the program after it, and the zygote (zygote_module.cc), whose program process goes
// on as the pre-started Python instead. Runs in the sandbox's new namespaces, after the
// root is built (child.h ChildSetUp), with the fds of init_plan.h.
#pragma once

#include <string>
#include <vector>

#include "sandbox/child.h"
#include "sandbox/init_plan.h"

namespace sandrun::sandbox {

// Writes a kSetupFailed report for `step` on the report fd and exits 127.
[[noreturn]] void InitFail(ChildStep step, int detail, int err);
[[noreturn]] void InitFail(ChildStep step, int detail);

// The encoded InitPlan from its memfd (kInitPlanFd), which it then closes.
std::string ReadPlanBytes();

// The user namespace's own limits (/proc/sys/user/<name>); fails the start on an error.
void WriteUserSysctls(const InitPlan& plan);

// In the program's process, everything before its execve: the signal mask emptied (and,
// with `reset_signals`, the dispositions init changed back to the default), the lifeline
// closed, a new session, oom_score_adj, no capabilities, the sandbox user's ids,
// no_new_privs, the rlimits, the working directory and the seccomp filter last. Without
// `reset_signals` (the zygote's program, which does not exec) the process is made dumpable
// again as execve would. Fails the start (InitFail) on an error.
void PrepareProgram(const InitPlan& plan, bool reset_signals);

// NUL-terminated pointers into `in`, for execve.
std::vector<char*> CStrings(const std::vector<std::string>& in);

}  // namespace sandrun::sandbox
