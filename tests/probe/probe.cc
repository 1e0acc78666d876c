// sandrun_probe: exercises the sandbox from inside (docs/STYLE.md "Tests"). The integration tests
// upload it as an input file and run it through the real service.
//   probe try-syscall NAME|all   call each refused syscall with harmless arguments and print
//                                "NAME ERRNO_NAME" (the filter must answer EPERM)
//   probe try-numbers FROM TO    call syscalls FROM..TO by number with harmless arguments and
//                                print "nr NR ERRNO_NAME|ALLOWED" (the allow list from 424 on)
//   probe socket-families        socket(2) and socketpair(2) for every family 0..45 (and two
//                                with upper bits set), netlink protocols 0..31: prints
//                                "family F socket=R socketpair=R" / "netlink P R", R being
//                                "ok" or the errno name(s)
//   probe vsock-bind PORT SEC    socket(AF_VSOCK) + bind to PORT, hold it SEC seconds
//   probe seccomp                print the Seccomp and NoNewPrivs lines of /proc/self/status
//   probe int80                  make a 32-bit (int 0x80) system call: must be killed
//   probe memhog MB              touch MB MiB of memory
//   probe forkbomb               fork until refused; print how many
//   probe write-files N          write N small files in the cwd
//   probe sockfill KIND PROCS N CAP_MB [HOST PORT]
//                                PROCS processes each open N sockets of KIND (tcp: loopback
//                                pairs, both ends writing; udp: loopback receivers with SO_RCVBUF
//                                raised; unix / unix-dgram: socketpairs with SO_SNDBUF raised;
//                                remote: TCP connections to HOST:PORT) and write without reading
//                                until the kernel refuses or CAP_MB MiB are queued in all; prints
//                                "sockfill KIND sockets=S written=B kernel=K tcp_pages=A->P
//                                udp_pages=A->P first_error=E", K being the sockets' buffers
//                                by SO_MEMINFO and A->P /proc/net/sockstat's mem before and at
//                                the peak (host-wide pages), then ends every process
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <linux/sock_diag.h>
#include <linux/vm_sockets.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
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
      {"fsconfig", SYS_fsconfig, {-1, 0, 0, 0, 0}},
      {"kcmp", SYS_kcmp, {0, 0, 0, 0, 0}},
      {"modify_ldt", SYS_modify_ldt, {0, 0, 0}},
      {"mbind", SYS_mbind, {0, 0, 0, 0, 0, 0}},
      {"set_mempolicy", SYS_set_mempolicy, {0, 0, 0}},
      {"migrate_pages", SYS_migrate_pages, {0, 0, 0, 0}},
      {"move_pages", SYS_move_pages, {0, 0, 0, 0, 0, 0}},
      // 424 and up: one number on every architecture (asm-generic/unistd.h); given as
      // numbers because Debian 12's headers (Linux 6.1) lack the newest.
      {"pidfd_getfd", 438, {-1, -1, 0}},
      {"process_madvise", 440, {-1, 0, 0, 0, 0}},
      {"quotactl_fd", 443, {-1, 0, 0, 0}},
      {"memfd_secret", 447, {0}},
      {"process_mrelease", 448, {-1, 0}},
      {"set_mempolicy_home_node", 450, {0, 0, 0, 0}},
      {"cachestat", 451, {-1, 0, 0, 0}},
      {"statmount", 457, {0, 0, 0, 0}},
      {"listmount", 458, {0, 0, 0, 0}},
      {"lsm_get_self_attr", 459, {0, 0, 0, 0}},
      {"lsm_set_self_attr", 460, {0, 0, 0, 0}},
      {"lsm_list_modules", 461, {0, 0, 0}},
      {"open_tree_attr", 467, {-1, 0, 0, 0, 0}},
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

// Every number FROM..TO with arguments that are invalid for each syscall there (-1 fds, null
// pointers, zero lengths), so that an allowed call fails in the kernel and does nothing.
// clone3 (435) is skipped when it could succeed: with a null argument it cannot.
int TryNumbers(long from, long to) {
  for (long nr = from; nr <= to; ++nr) {
    errno = 0;
    long r = syscall(nr, -1L, 0L, 0L, 0L, 0L, 0L);
    if (r >= 0) {
      std::printf("nr %ld ALLOWED\n", nr);
    } else {
      std::printf("nr %ld %s\n", nr, strerrorname_np(errno));
    }
  }
  return 0;
}

// "ok" if any of the calls succeeded, else the distinct errno names joined by ','.
std::string Outcome(const std::vector<long>& results, const std::vector<int>& errnos) {
  std::set<std::string> names;
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i] >= 0) return "ok";
    names.insert(strerrorname_np(errnos[i]));
  }
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

// socket(2) with each common type; raw syscall so that a family with upper bits set reaches
// the filter as it is (the kernel itself truncates it to an int).
std::string TrySocket(long family, long protocol) {
  std::vector<long> results;
  std::vector<int> errnos;
  for (long type : {SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET, SOCK_RAW}) {
    errno = 0;
    long fd = syscall(SYS_socket, family, type | SOCK_CLOEXEC, protocol);
    results.push_back(fd);
    errnos.push_back(errno);
    if (fd >= 0) close(static_cast<int>(fd));
  }
  return Outcome(results, errnos);
}

std::string TrySocketPair(long family) {
  std::vector<long> results;
  std::vector<int> errnos;
  for (long type : {SOCK_STREAM, SOCK_DGRAM}) {
    int sv[2];
    errno = 0;
    long r = syscall(SYS_socketpair, family, type | SOCK_CLOEXEC, 0L, sv);
    results.push_back(r);
    errnos.push_back(errno);
    if (r == 0) {
      close(sv[0]);
      close(sv[1]);
    }
  }
  return Outcome(results, errnos);
}

int SocketFamilies() {
  std::vector<long> families;
  for (long f = 0; f <= 45; ++f) families.push_back(f);
  families.push_back((1L << 32) | AF_UNIX);   // the kernel would see AF_UNIX
  families.push_back((1L << 32) | AF_VSOCK);  // the kernel would see AF_VSOCK
  for (long f : families) {
    std::printf("family %ld socket=%s socketpair=%s\n", f, TrySocket(f, 0).c_str(),
                TrySocketPair(f).c_str());
  }
  for (long protocol = 0; protocol < 32; ++protocol) {
    std::printf("netlink %ld %s\n", protocol, TrySocket(AF_NETLINK, protocol).c_str());
  }
  return 0;
}

// The vsock attack: a vsock port bound inside is taken on the host.
int VsockBind(unsigned port, unsigned seconds) {
  int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    std::printf("vsock socket %s\n", strerrorname_np(errno));
    return 0;
  }
  sockaddr_vm addr{};
  addr.svm_family = AF_VSOCK;
  addr.svm_cid = VMADDR_CID_ANY;
  addr.svm_port = port;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    std::printf("vsock bind %s\n", strerrorname_np(errno));
    return 0;
  }
  std::printf("vsock bound %u\n", port);
  sleep(seconds);
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

// ---- sockfill --------------------------------------------------------------------------

struct FillTotals {
  long long written = 0;  // bytes the kernel accepted
  long long kernel = 0;   // the sockets' buffers (SO_MEMINFO)
  long long sockets = 0;
  int first_error = 0;
};

// Kernel-side bytes of one socket: its receive queue and its send queue / in-flight skbs.
long long SocketBytes(int fd) {
  unsigned info[SK_MEMINFO_VARS] = {};
  socklen_t len = sizeof info;
  if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, info, &len) != 0) return 0;
  return static_cast<long long>(info[SK_MEMINFO_RMEM_ALLOC]) +
         std::max(info[SK_MEMINFO_WMEM_ALLOC], info[SK_MEMINFO_WMEM_QUEUED]);
}

// Writes to `fd` (non-blocking) until the kernel refuses for `settle_ms`, `budget` is spent or
// `most` bytes went to this socket (UDP: a full receiver drops what comes, sendto still says
// yes).
void FillOne(int fd, bool datagram, int settle_ms, long long most, long long& budget,
             FillTotals& t) {
  static char chunk[60000];
  const size_t size = datagram ? 60000 : sizeof chunk;
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  for (int round = 0; round < 4000 && budget > 0 && most > 0; ++round) {
    ssize_t n = send(fd, chunk, size, MSG_NOSIGNAL);
    if (n > 0) {
      t.written += n;
      budget -= n;
      most -= n;
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != ENOBUFS && errno != ENOMEM) {
      if (t.first_error == 0) t.first_error = errno;
      return;
    }
    if (n < 0 && errno != EAGAIN && t.first_error == 0) t.first_error = errno;
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, settle_ms) != 1) return;
  }
}

sockaddr_in Loopback(unsigned short port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// One pair (or connection) of `kind`: [0] is written to, [1] (if any) is never read.
bool OpenPair(const std::string& kind, int listener, const sockaddr_in& remote, int fds[2]) {
  const int big = 64 << 20;  // the kernel caps it at net.core.[rw]mem_max (x2)
  fds[0] = fds[1] = -1;
  if (kind == "unix" || kind == "unix-dgram") {
    if (socketpair(AF_UNIX, kind == "unix" ? SOCK_STREAM : SOCK_DGRAM, 0, fds) != 0) return false;
    setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    return true;
  }
  // A socket(2) refused (the socket cap: EPERM) ends the pair with its errno.
  if (kind == "udp") {
    fds[1] = socket(AF_INET, SOCK_DGRAM, 0);
    if (fds[1] < 0) return false;
    sockaddr_in a = Loopback(0);
    socklen_t len = sizeof a;
    setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    if (bind(fds[1], reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return false;
    getsockname(fds[1], reinterpret_cast<sockaddr*>(&a), &len);
    fds[0] = socket(AF_INET, SOCK_DGRAM, 0);
    if (fds[0] < 0) return false;
    return connect(fds[0], reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  fds[0] = socket(AF_INET, SOCK_STREAM, 0);
  if (fds[0] < 0) return false;
  if (kind == "remote") {
    return connect(fds[0], reinterpret_cast<const sockaddr*>(&remote), sizeof remote) == 0;
  }
  sockaddr_in a{};
  socklen_t len = sizeof a;
  getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
  if (connect(fds[0], reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return false;
  fds[1] = accept(listener, nullptr, nullptr);
  return fds[1] >= 0;
}

// One process's share: `n` sockets filled within `budget` bytes.
FillTotals FillProcess(const std::string& kind, int n, long long budget,
                       const sockaddr_in& remote) {
  FillTotals t;
  int listener = -1;
  if (kind == "tcp") {
    listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = Loopback(0);
    bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(listener, 1024);
  }
  std::vector<int> all;
  const bool datagram = kind == "udp" || kind == "unix-dgram";
  const int settle_ms = kind == "remote" ? 300 : 20;
  for (int i = 0; i < n && budget > 0; ++i) {
    int fds[2];
    if (!OpenPair(kind, listener, remote, fds)) {
      if (t.first_error == 0) t.first_error = errno;
      break;
    }
    for (int fd : fds) {
      if (fd >= 0) all.push_back(fd);
    }
    t.sockets += fds[1] >= 0 ? 2 : 1;
    int rcvbuf = 0;
    socklen_t len = sizeof rcvbuf;
    getsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len);
    const long long most = kind == "udp" ? rcvbuf + (1LL << 20) : 1LL << 40;
    FillOne(fds[0], datagram, settle_ms, most, budget, t);
    // tcp: both ends write, each to a peer that never reads: the kernel's forced charges
    // (a socket with empty queues) then fall on both, the worst case per socket.
    if (kind == "tcp") FillOne(fds[1], datagram, settle_ms, most, budget, t);
  }
  // Again, once: a queue the peer's window drained is empty again and forced once more.
  if (kind == "tcp") {
    for (int fd : all) FillOne(fd, datagram, 0, 1LL << 40, budget, t);
  }
  for (int fd : all) t.kernel += SocketBytes(fd);
  return t;
}

// "mem" of `proto` ("TCP:", "UDP:") in /proc/net/sockstat: pages, host-wide.
long SockstatPages(const char* proto) {
  std::ifstream in("/proc/net/sockstat");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(proto, 0) != 0) continue;
    size_t at = line.find(" mem ");
    return at == std::string::npos ? -1 : std::atol(line.c_str() + at + 5);
  }
  return -1;
}

int SockFill(const std::string& kind, int procs, int n, long cap_mb, const char* host, int port) {
  sockaddr_in remote = Loopback(static_cast<unsigned short>(port));
  if (host != nullptr) inet_pton(AF_INET, host, &remote.sin_addr);
  const long tcp0 = SockstatPages("TCP:"), udp0 = SockstatPages("UDP:");
  const long long share = (static_cast<long long>(cap_mb) << 20) / std::max(1, procs);
  int report[2], release[2];
  if (pipe(report) != 0 || pipe(release) != 0) return 1;
  std::vector<pid_t> children;
  for (int i = 1; i < procs; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      close(release[1]);
      FillTotals t = FillProcess(kind, n, share, remote);
      (void)!write(report[1], &t, sizeof t);
      char byte;
      (void)!read(release[0], &byte, 1);  // hold the sockets until the parent has measured
      _exit(0);
    }
    if (pid < 0) break;
    children.push_back(pid);
  }
  FillTotals sum = FillProcess(kind, n, share, remote);
  for (size_t i = 0; i < children.size(); ++i) {
    FillTotals t;
    if (read(report[0], &t, sizeof t) != static_cast<ssize_t>(sizeof t)) break;
    sum.written += t.written;
    sum.kernel += t.kernel;
    sum.sockets += t.sockets;
    if (sum.first_error == 0) sum.first_error = t.first_error;
  }
  const long tcp1 = SockstatPages("TCP:"), udp1 = SockstatPages("UDP:");
  std::printf(
      "sockfill %s sockets=%lld written=%lld kernel=%lld tcp_pages=%ld->%ld "
      "udp_pages=%ld->%ld first_error=%s\n",
      kind.c_str(), sum.sockets, sum.written, sum.kernel, tcp0, tcp1, udp0, udp1,
      sum.first_error != 0 ? strerrorname_np(sum.first_error) : "none");
  close(release[1]);
  for (pid_t pid : children) waitpid(pid, nullptr, 0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "try-syscall" && argc > 2) return TrySyscall(argv[2]);
  if (cmd == "try-numbers" && argc > 3) return TryNumbers(std::atol(argv[2]), std::atol(argv[3]));
  if (cmd == "socket-families") return SocketFamilies();
  if (cmd == "vsock-bind" && argc > 3) {
    return VsockBind(static_cast<unsigned>(std::atol(argv[2])),
                     static_cast<unsigned>(std::atol(argv[3])));
  }
  if (cmd == "seccomp") return PrintSeccomp();
  if (cmd == "int80") return Int80();
  if (cmd == "memhog" && argc > 2) return MemHog(std::atol(argv[2]));
  if (cmd == "forkbomb") return ForkBomb();
  if (cmd == "write-files" && argc > 2) return WriteFiles(std::atol(argv[2]));
  if (cmd == "sockfill" && argc > 5) {
    return SockFill(argv[2], std::atoi(argv[3]), std::atoi(argv[4]), std::atol(argv[5]),
                    argc > 7 ? argv[6] : nullptr, argc > 7 ? std::atoi(argv[7]) : 0);
  }
  std::fprintf(stderr,
               "usage: probe try-syscall NAME|all | try-numbers FROM TO | socket-families | "
               "vsock-bind PORT SECONDS | seccomp | int80 | memhog MB | forkbomb | write-files N | "
               "sockfill KIND PROCS N CAP_MB [HOST PORT]\n");
  return 2;
}
