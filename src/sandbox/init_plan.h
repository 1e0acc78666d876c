// What sandrun-init (the sandbox's pid 1, its own small executable: init_main.cc) needs to
// start the program, as plain values, and its byte encoding. The launcher encodes the plan
// into a memfd before clone(2); init decodes it after execve, so nothing of the daemon's
// memory is carried into the sandbox (init is small, the OOM killer
// picks the program's processes, not init).
#pragma once

#include <linux/filter.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/result.h"

namespace sandrun::sandbox {

// File descriptors init starts with (the clone child arranges them before execve).
// 0, 1, 2: the program's stdin/stdout/stderr pipes.
constexpr int kInitReportFd = 3;    // ChildReport records to the launcher (close-on-exec)
constexpr int kInitPlanFd = 5;      // memfd holding the encoded InitPlan
constexpr int kInitLifelineFd = 6;  // read end of a pipe whose write end only the daemon holds
constexpr int kInitExeFd = 7;       // sandrun-init, for the clone child's execveat (close-on-exec)

// The sandbox user inside the user namespace (mapped to config sandbox_uid/gid).
constexpr uid_t kInsideUid = 1000;
constexpr gid_t kInsideGid = 1000;

struct InitRlimit {
  int resource;
  rlim_t soft, hard;
};

struct InitPlan {
  uid_t uid = kInsideUid;  // inside the user namespace
  gid_t gid = kInsideGid;
  // oom_score_adj of the program and everything it starts (raising needs no privilege;
  // init keeps its own 0, so under a memory limit the kernel kills the program's biggest
  // process, not init).
  int oom_score_adj = 1000;
  std::string workdir;
  std::string program;  // absolute path inside
  std::vector<std::string> argv;
  std::vector<std::string> envp;
  std::vector<InitRlimit> rlimits;
  std::vector<sock_filter> seccomp;  // loaded last, in the program's process only
  // Per-user-namespace limits written to /proc/sys/user/<name> of the sandbox's own user
  // namespace (user_namespaces(7), kernel/ucount.c), e.g. max_inotify_instances.
  std::vector<std::pair<std::string, std::string>> user_sysctls;
};

// Pure, not child-safe (allocates). The encoding is private to one build of sandrun: the
// daemon and init are installed together.
std::string EncodeInitPlan(const InitPlan& plan);
// Errors: kProtocol when `bytes` is truncated, oversized or not an InitPlan.
Result<InitPlan> DecodeInitPlan(std::string_view bytes);

// What the zygote (zygote.h) needs to build a sandbox's root for the daemon, as plain values:
// the ChildPlan's paths and mount steps (its fds travel beside it, SCM_RIGHTS).
struct ZygoteRequest {
  uint32_t owner_uid = 0;  // the user namespace's owner (launcher.cc CloneChild)
  bool new_net = true;     // CLONE_NEWNET (else the request carries a network namespace)
  std::string root_dir, put_old, hostname;
  struct Step {
    int op = 0;
    bool has_source = false, has_data = false;
    std::string source, target, data;
    uint64_t flags = 0;
  };
  std::vector<Step> steps;
};
std::string EncodeZygoteRequest(const ZygoteRequest& request);
// Errors: kProtocol when `bytes` is not a whole ZygoteRequest.
Result<ZygoteRequest> DecodeZygoteRequest(std::string_view bytes);

}  // namespace sandrun::sandbox
