// The host's processes as /proc shows them, for the checks that nothing a stack started
// outlives its stop (Stack::teardown; integration.Cluster for every node and the front).
// Nothing here uses the test stack (Stack), so a test that starts stacks of its own
// (cluster_test.cc) links this file alone.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace sandrun::integration {

// argv of every process on the host (pid → argv), read from /proc/<pid>/cmdline; kernel
// threads and zombies (empty cmdline) are left out.
std::map<pid_t, std::vector<std::string>> ProcessArgvs();

// Whether `pid` exists and is not a zombie.
bool ProcessAlive(pid_t pid);

// The nginx whose prefix is `nginx_dir` (pid file <dir>/nginx.pid, config <dir>/nginx.conf):
// its master (by the pid file, or by the config its title names) and the master's workers.
std::vector<pid_t> NginxProcesses(const std::string& nginx_dir);

// A scripts/serve stack on `state_dir`: sandrund --config <state_dir>/sandrun.jsonc, and
// NginxProcesses(<state_dir>/nginx).
std::vector<pid_t> StackProcesses(const std::string& state_dir);

// `root` and every process below it, by each process's parent pid.
std::vector<pid_t> ProcessTree(pid_t root);

// A process at one moment: its pid and its start time (clock ticks after boot, field 22 of
// /proc/<pid>/stat), so that a pid the kernel hands to a new process later is not taken
// for it.
struct ProcessId {
  pid_t pid = 0;
  uint64_t start = 0;
  bool operator<(const ProcessId& other) const {
    return pid != other.pid ? pid < other.pid : start < other.start;
  }
};

// The ProcessIds of `pids` that exist now (the others are left out).
std::set<ProcessId> Identify(const std::vector<pid_t>& pids);

// Those of `seen` still alive (same pid and start time, not a zombie) once they have had up
// to `grace_s` seconds to exit.
std::vector<pid_t> Survivors(const std::set<ProcessId>& seen, double grace_s);

}  // namespace sandrun::integration
