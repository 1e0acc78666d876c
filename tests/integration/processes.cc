#include "processes.h"

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace sandrun::integration {
namespace {

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The fields of /proc/<pid>/stat after "pid (comm) ", which may hold spaces and parentheses;
// empty if the process is gone.
std::vector<std::string> StatFields(pid_t pid) {
  const std::string stat = ReadWhole("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  std::vector<std::string> fields;
  if (paren == std::string::npos || paren + 2 >= stat.size()) return fields;
  std::istringstream in(stat.substr(paren + 2));
  std::string field;
  while (in >> field) fields.push_back(field);
  return fields;
}

// Field 4 (ppid) and field 22 (starttime) of stat(5), counted from 1 with pid and comm.
constexpr size_t kPpid = 4 - 3;
constexpr size_t kStartTime = 22 - 3;

pid_t ParentOf(pid_t pid) {
  const std::vector<std::string> f = StatFields(pid);
  return f.size() > kPpid ? static_cast<pid_t>(std::atol(f[kPpid].c_str())) : -1;
}

uint64_t StartOf(pid_t pid) {
  const std::vector<std::string> f = StatFields(pid);
  return f.size() > kStartTime ? std::strtoull(f[kStartTime].c_str(), nullptr, 10) : 0;
}

}  // namespace

std::map<pid_t, std::vector<std::string>> ProcessArgvs() {
  std::map<pid_t, std::vector<std::string>> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string cmdline = ReadWhole(entry.path() / "cmdline");
    if (cmdline.empty()) continue;
    std::vector<std::string> argv;
    std::istringstream in(cmdline);
    std::string arg;
    while (std::getline(in, arg, '\0')) argv.push_back(arg);
    out[static_cast<pid_t>(std::stol(name))] = std::move(argv);
  }
  return out;
}

bool ProcessAlive(pid_t pid) {
  if (kill(pid, 0) != 0) return false;
  const std::vector<std::string> f = StatFields(pid);
  return f.empty() || f[0] != "Z";
}

std::vector<pid_t> NginxProcesses(const std::string& nginx_dir) {
  const std::string conf = nginx_dir + "/nginx.conf";
  const std::string pid_file = ReadWhole(nginx_dir + "/nginx.pid");
  // Masters: the pid file's, and any whose title names the config ("nginx: master process
  // nginx -p <dir>/ -c <dir>/nginx.conf ..."; the pid file may be gone or not written yet).
  std::set<pid_t> masters;
  if (const pid_t p = static_cast<pid_t>(std::atol(pid_file.c_str())); p > 0) masters.insert(p);
  const auto argvs = ProcessArgvs();
  for (const auto& [pid, argv] : argvs) {
    for (const std::string& arg : argv) {
      if (arg.find(conf) != std::string::npos) masters.insert(pid);
    }
  }
  std::vector<pid_t> out(masters.begin(), masters.end());
  // The workers, whose title names nothing: the masters' children.
  for (const auto& [pid, argv] : argvs) {
    if (masters.count(ParentOf(pid)) != 0) out.push_back(pid);
  }
  return out;
}

std::vector<pid_t> StackProcesses(const std::string& state_dir) {
  const std::string config_arg = state_dir + "/sandrun.jsonc";
  std::vector<pid_t> out = NginxProcesses(state_dir + "/nginx");
  for (const auto& [pid, argv] : ProcessArgvs()) {
    for (size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == "--config" && argv[i + 1] == config_arg) {
        out.push_back(pid);
        break;
      }
    }
  }
  return out;
}

std::vector<pid_t> ProcessTree(pid_t root) {
  std::map<pid_t, std::vector<pid_t>> children;
  for (const auto& [pid, argv] : ProcessArgvs()) children[ParentOf(pid)].push_back(pid);
  std::vector<pid_t> out = {root};
  for (size_t i = 0; i < out.size(); ++i) {
    for (pid_t child : children[out[i]]) out.push_back(child);
  }
  return out;
}

std::set<ProcessId> Identify(const std::vector<pid_t>& pids) {
  std::set<ProcessId> out;
  for (pid_t pid : pids) {
    const uint64_t start = StartOf(pid);
    if (start != 0) out.insert({pid, start});
  }
  return out;
}

std::vector<pid_t> Survivors(const std::set<ProcessId>& seen, double grace_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  while (true) {
    std::vector<pid_t> alive;
    for (const ProcessId& p : seen) {
      if (ProcessAlive(p.pid) && StartOf(p.pid) == p.start) alive.push_back(p.pid);
    }
    if (alive.empty() || std::chrono::steady_clock::now() >= deadline) return alive;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace sandrun::integration
