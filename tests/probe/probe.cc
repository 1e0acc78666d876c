// sandrun_probe: exercises the sandbox from inside (STYLE.md "Tests"). The integration tests
// upload it as an input file and run it through the real service.
//   probe try-syscall NAME|all   call each refused syscall with harmless arguments and print
//                                "NAME ERRNO_NAME" (the filter must answer EPERM)
//   probe seccomp                print the Seccomp and NoNewPrivs lines of /proc/self/status
//   probe int80                  make a 32-bit (int 0x80) system call: must be killed
//   probe memhog MB              touch MB MiB of memory
//   probe forkbomb               fork until refused; print how many
//   probe write-files N          write N small files in the cwd
#include <errno.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

struct Probe {
  const char* name;
  long nr;
  long args[6];
};

// Harmless arguments: invalid or empty, so that only the seccomp filter can be the reason for
// EPERM on most of them, and nothing happens if a call were let through.
const std::vector<Probe>& Probes() {
  static const std::vector<Probe> kProbes = {
      {"kexec_load", SYS_kexec_load, {0, 0, 0, 0}},
      {"kexec_file_load", SYS_kexec_file_load, {-1, -1, 0, 0, 0}},
      {"init_module", SYS_init_module, {0, 0, 0}},
      {"finit_module", SYS_finit_module, {-1, 0, 0}},
      {"delete_module", SYS_delete_module, {0, 0}},
      {"mount", SYS_mount, {0, 0, 0, 0, 0}},
      {"umount2", SYS_umount2, {0, 0}},
      {"pivot_root", SYS_pivot_root, {0, 0}},
      {"chroot", SYS_chroot, {0}},
      {"move_mount", SYS_move_mount, {-1, 0, -1, 0, 0}},
      {"open_tree", SYS_open_tree, {-1, 0, 0}},
      {"fsopen", SYS_fsopen, {0, 0}},
      {"fsmount", SYS_fsmount, {-1, 0, 0}},
      {"fspick", SYS_fspick, {-1, 0, 0}},
      {"mount_setattr", SYS_mount_setattr, {-1, 0, 0, 0, 0}},
      {"swapon", SYS_swapon, {0, 0}},
      {"swapoff", SYS_swapoff, {0}},
      {"reboot", SYS_reboot, {0, 0, 0, 0}},
      {"bpf", SYS_bpf, {-1, 0, 0}},
      {"perf_event_open", SYS_perf_event_open, {0, 0, -1, -1, 0}},
      {"userfaultfd", SYS_userfaultfd, {0}},
      {"keyctl", SYS_keyctl, {0, 0, 0, 0, 0}},
      {"add_key", SYS_add_key, {0, 0, 0, 0, 0}},
      {"request_key", SYS_request_key, {0, 0, 0, 0}},
      {"ptrace", SYS_ptrace, {-1, 0, 0, 0}},
      {"process_vm_readv", SYS_process_vm_readv, {1, 0, 0, 0, 0, 0}},
      {"process_vm_writev", SYS_process_vm_writev, {1, 0, 0, 0, 0, 0}},
      {"open_by_handle_at", SYS_open_by_handle_at, {-1, 0, 0}},
      {"name_to_handle_at", SYS_name_to_handle_at, {-1, 0, 0, 0, 0}},
      {"unshare", SYS_unshare, {CLONE_NEWUSER}},
      {"setns", SYS_setns, {-1, 0}},
      {"io_uring_setup", SYS_io_uring_setup, {0, 0}},
      {"io_uring_enter", SYS_io_uring_enter, {-1, 0, 0, 0, 0, 0}},
      {"io_uring_register", SYS_io_uring_register, {-1, 0, 0, 0}},
      {"acct", SYS_acct, {0}},
      {"quotactl", SYS_quotactl, {0, 0, 0, 0}},
      {"syslog", SYS_syslog, {3, 0, 0}},
      {"iopl", SYS_iopl, {3}},
      {"ioperm", SYS_ioperm, {0, 1, 1}},
      {"personality", SYS_personality, {0x0040000 /* ADDR_NO_RANDOMIZE */}},
      {"clone_newuser", SYS_clone, {CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0}},
      {"clone_newns", SYS_clone, {CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0}},
      {"clone_newnet", SYS_clone, {CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0}},
      {"clone_newpid", SYS_clone, {CLONE_NEWPID | SIGCHLD, 0, 0, 0, 0}},
  };
  return kProbes;
}

int TrySyscall(const std::string& which) {
  int tried = 0;
  for (const Probe& p : Probes()) {
    if (which != "all" && which != p.name) continue;
    ++tried;
    errno = 0;
    long r = syscall(p.nr, p.args[0], p.args[1], p.args[2], p.args[3], p.args[4], p.args[5]);
    if (r == 0 && p.nr == SYS_clone) _exit(0);  // a child got through: leave at once
    if (r > 0 && p.nr == SYS_clone) waitpid(static_cast<pid_t>(r), nullptr, 0);
    if (r >= 0) {
      std::printf("%s ALLOWED\n", p.name);
    } else {
      std::printf("%s %s\n", p.name, strerrorname_np(errno));
    }
  }
  if (tried == 0) {
    std::fprintf(stderr, "unknown syscall probe %s\n", which.c_str());
    return 2;
  }
  return 0;
}

int PrintSeccomp() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Seccomp", 0) == 0 || line.rfind("NoNewPrivs", 0) == 0) {
      std::printf("%s\n", line.c_str());
    }
  }
  return 0;
}

int Int80() {
  // i386 getpid (20) through the 32-bit entry point; the filter's bad-ABI action kills us.
  long r;
  asm volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory");
  std::printf("int80 returned %ld\n", r);
  return 0;
}

int MemHog(long mb) {
  std::vector<char*> blocks;
  for (long i = 0; i < mb; ++i) {
    char* block = static_cast<char*>(std::malloc(1 << 20));
    if (block == nullptr) {
      std::printf("malloc failed after %ld MiB\n", i);
      return 1;
    }
    std::memset(block, 1, 1 << 20);
    blocks.push_back(block);
  }
  std::printf("touched %ld MiB\n", mb);
  return 0;
}

int ForkBomb() {
  int children = 0;
  for (;;) {
    pid_t pid = fork();
    if (pid == 0) {
      pause();
      _exit(0);
    }
    if (pid < 0) {
      std::printf("fork refused after %d children: %s\n", children, strerror(errno));
      return 0;
    }
    ++children;
  }
}

int WriteFiles(long n) {
  for (long i = 0; i < n; ++i) {
    std::string name = "file_" + std::to_string(i) + ".txt";
    std::ofstream(name) << i << "\n";
  }
  std::printf("wrote %ld files\n", n);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "try-syscall" && argc > 2) return TrySyscall(argv[2]);
  if (cmd == "seccomp") return PrintSeccomp();
  if (cmd == "int80") return Int80();
  if (cmd == "memhog" && argc > 2) return MemHog(std::atol(argv[2]));
  if (cmd == "forkbomb") return ForkBomb();
  if (cmd == "write-files" && argc > 2) return WriteFiles(std::atol(argv[2]));
  std::fprintf(stderr,
               "usage: probe try-syscall NAME|all | seccomp | int80 | memhog MB | forkbomb | "
               "write-files N\n");
  return 2;
}
