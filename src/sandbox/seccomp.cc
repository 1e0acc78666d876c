#include "sandbox/seccomp.h"

#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <iterator>
#include <memory>
#include <vector>

#include "sys/syscalls.h"

namespace sandrun::sandbox {
namespace {

// A refused syscall and why. Every rule answers EPERM, so programs see an ordinary
// "Operation not permitted" rather than dying. Syscalls numbered below 424 by name: their
// numbers differ between architectures and libseccomp knows them all; a name missing on this
// architecture (iopl on aarch64) is skipped. From 424 on see kNewSyscalls.
struct Rule {
  const char* name;
  const char* reason;
};

constexpr Rule kRefused[] = {
    {"kexec_load", "would replace the running kernel"},
    {"kexec_file_load", "would replace the running kernel"},
    {"init_module", "loads code into the kernel"},
    {"finit_module", "loads code into the kernel"},
    {"delete_module", "unloads kernel code"},
    {"mount", "the file system view is fixed by the launcher"},
    {"umount2", "could uncover what the sandbox's mounts hide"},
    {"pivot_root", "the root is fixed by the launcher"},
    {"chroot", "the root is fixed by the launcher"},
    {"swapon", "host memory management"},
    {"swapoff", "host memory management"},
    {"reboot", "host power state"},
    {"bpf", "kernel attack surface (eBPF verifier bugs)"},
    {"perf_event_open", "kernel attack surface and side channels"},
    {"userfaultfd", "used to widen kernel race windows in exploits"},
    {"keyctl", "kernel keyrings are not namespaced"},
    {"add_key", "kernel keyrings are not namespaced"},
    {"request_key", "kernel keyrings are not namespaced"},
    {"ptrace", "could inspect or steer processes; not needed to run code"},
    {"process_vm_readv", "reads another process's memory"},
    {"process_vm_writev", "writes another process's memory"},
    {"kcmp", "compares kernel objects of other processes (info leak)"},
    {"open_by_handle_at", "bypasses path checks (the 'shocker' container escape)"},
    {"name_to_handle_at", "pairs with open_by_handle_at"},
    {"unshare", "new namespaces would give back capabilities (user namespaces)"},
    {"setns", "joining namespaces"},
    {"acct", "process accounting is host-wide"},
    {"quotactl", "disk quotas are host-wide"},
    {"syslog", "kernel log leaks host information (dmesg)"},
    {"iopl", "raw I/O port access"},
    {"ioperm", "raw I/O port access"},
    {"modify_ldt", "x86 LDT: only 16-bit code and Wine need it; a history of kernel CVEs"},
    {"lookup_dcookie", "kernel profiling interface"},
    {"settimeofday", "host clock"},
    {"clock_settime", "host clock"},
    {"clock_adjtime", "host clock"},
    {"adjtimex", "host clock"},
    {"vhangup", "terminal control of the host"},
    {"uselib", "obsolete loader interface with a history of bugs"},
    {"ustat", "obsolete; host file system information"},
    {"sysfs", "obsolete; host file system information"},
    {"_sysctl", "obsolete sysctl interface"},
    {"nfsservctl", "obsolete NFS server control"},
    {"fanotify_init", "watches file access system-wide"},
    // NUMA placement: Docker's default profile allows these only with CAP_SYS_NICE; a run
    // has one node's worth of memory to place, and libnuma/OpenBLAS treat EPERM as "no NUMA".
    // get_mempolicy (read-only) stays allowed.
    {"mbind", "NUMA placement of host memory; mempolicy code has had CVEs"},
    {"set_mempolicy", "NUMA placement of host memory; mempolicy code has had CVEs"},
    {"migrate_pages", "moves another process's pages between NUMA nodes"},
    {"move_pages", "moves (or, on others, inspects) pages between NUMA nodes"},
};

// What the filter does with a syscall of kNewSyscalls.
enum class Verdict {
  kAllow,
  kRefuse,          // EPERM, like kRefused
  kNotImplemented,  // ENOSYS, so that libc falls back to an older call the filter can check
};

struct NewSyscall {
  int nr;
  const char* name;
  Verdict verdict;
  const char* reason;
};

// Every syscall from 424 on, decided one by one: an allow list for the part of the table that
// grows. Since Linux 5.1 these numbers are the same on every architecture but alpha
// (include/uapi/asm-generic/unistd.h; arch/x86/entry/syscalls/syscall_64.tbl, "common"
// entries 424-469 as of Linux 6.18), so they are given as numbers: libseccomp 2.5.4
// (Debian 12) does not know the names of the newest (statmount, listmount, mseal,
// open_tree_attr). Numbers above the last entry (a newer kernel's syscalls) answer ENOSYS
// (see Compile), as runc does for syscalls newer than its profile.
constexpr NewSyscall kNewSyscalls[] = {
    {424, "pidfd_send_signal", Verdict::kAllow, "kill(2) by pidfd; only reaches the run's pids"},
    {425, "io_uring_setup", Verdict::kRefuse, "io_uring bypasses seccomp; long CVE history"},
    {426, "io_uring_enter", Verdict::kRefuse, "io_uring bypasses seccomp; long CVE history"},
    {427, "io_uring_register", Verdict::kRefuse, "io_uring bypasses seccomp; long CVE history"},
    {428, "open_tree", Verdict::kRefuse, "new mount API: could clone host mounts"},
    {429, "move_mount", Verdict::kRefuse, "new mount API: same as mount"},
    {430, "fsopen", Verdict::kRefuse, "new mount API: same as mount"},
    {431, "fsconfig", Verdict::kRefuse, "new mount API: same as mount"},
    {432, "fsmount", Verdict::kRefuse, "new mount API: same as mount"},
    {433, "fspick", Verdict::kRefuse, "new mount API: reconfigures mounts"},
    {434, "pidfd_open", Verdict::kAllow, "Python's subprocess and asyncio wait on pidfds"},
    {435, "clone3", Verdict::kNotImplemented,
     "flags are in memory, which seccomp cannot read: libc falls back to clone(2)"},
    {436, "close_range", Verdict::kAllow, "glibc and Python close inherited fds with it"},
    {437, "openat2", Verdict::kAllow, "openat with stricter resolution; same permission checks"},
    {438, "pidfd_getfd", Verdict::kRefuse, "copies another process's fd: ptrace-like"},
    {439, "faccessat2", Verdict::kAllow, "glibc's faccessat (test -x in every shell)"},
    {440, "process_madvise", Verdict::kRefuse, "acts on another process's memory: ptrace-like"},
    {441, "epoll_pwait2", Verdict::kAllow, "epoll_pwait with a nanosecond timeout"},
    {442, "mount_setattr", Verdict::kRefuse, "new mount API: would change read-only flags"},
    {443, "quotactl_fd", Verdict::kRefuse, "disk quotas are host-wide"},
    {444, "landlock_create_ruleset", Verdict::kAllow,
     "Landlock only restricts the caller: programs may sandbox themselves further"},
    {445, "landlock_add_rule", Verdict::kAllow, "Landlock only restricts the caller"},
    {446, "landlock_restrict_self", Verdict::kAllow, "Landlock only restricts the caller"},
    {447, "memfd_secret", Verdict::kRefuse,
     "removes pages from the kernel's direct map; no use in a run, little-tested code"},
    {448, "process_mrelease", Verdict::kRefuse, "OOM helper for system daemons; no use here"},
    {449, "futex_waitv", Verdict::kAllow, "futex wait on several words (Wine, newer libcs)"},
    {450, "set_mempolicy_home_node", Verdict::kRefuse, "NUMA placement, like mbind"},
    {451, "cachestat", Verdict::kRefuse, "page cache state of host files: a side channel"},
    {452, "fchmodat2", Verdict::kAllow, "glibc 2.39's fchmodat; same checks as chmod"},
    {453, "map_shadow_stack", Verdict::kAllow, "x86 CET shadow stacks of glibc"},
    {454, "futex_wake", Verdict::kAllow, "futex2: same as futex"},
    {455, "futex_wait", Verdict::kAllow, "futex2: same as futex"},
    {456, "futex_requeue", Verdict::kAllow, "futex2: same as futex"},
    {457, "statmount", Verdict::kRefuse,
     "new mount API; mounts of other namespaces by id. /proc/self/mountinfo has the run's"},
    {458, "listmount", Verdict::kRefuse, "new mount API; see statmount"},
    {459, "lsm_get_self_attr", Verdict::kRefuse, "host security module state; no use here"},
    {460, "lsm_set_self_attr", Verdict::kRefuse, "host security module state; no use here"},
    {461, "lsm_list_modules", Verdict::kRefuse, "host security module state; no use here"},
    {462, "mseal", Verdict::kAllow, "only seals the caller's own mappings (newer glibc, Chrome)"},
    {463, "setxattrat", Verdict::kAllow, "*at form of setxattr; same checks"},
    {464, "getxattrat", Verdict::kAllow, "*at form of getxattr; same checks"},
    {465, "listxattrat", Verdict::kAllow, "*at form of listxattr; same checks"},
    {466, "removexattrat", Verdict::kAllow, "*at form of removexattr; same checks"},
    {467, "open_tree_attr", Verdict::kRefuse, "new mount API: open_tree with new attributes"},
    {468, "file_getattr", Verdict::kAllow, "FS_IOC_FSGETXATTR by path; same checks"},
    {469, "file_setattr", Verdict::kAllow, "FS_IOC_FSSETXATTR by path; same checks"},
};

constexpr int kFirstNewSyscall = 424;

constexpr bool NumberedWithoutGaps() {
  int expected = kFirstNewSyscall;
  for (const NewSyscall& s : kNewSyscalls) {
    if (s.nr != expected++) return false;
  }
  return true;
}
static_assert(NumberedWithoutGaps(), "kNewSyscalls must decide every number from 424 on");

// Socket families a run may open with socket(2) or socketpair(2). Every other family, and
// every family number the kernel may add later, answers EAFNOSUPPORT ("Address family not
// supported by protocol", what programs already handle for a family the kernel lacks).
// Families that are not network-namespaced escape the run's empty network namespace:
// AF_VSOCK binds ports of the host (and of the hypervisor on a VM). Refusing the rest also
// keeps the kernel from loading protocol modules on demand (net-pf-N: DCCP, RDS, TIPC, ...).
struct SocketFamily {
  int family;
  const char* reason;
};

constexpr SocketFamily kSocketFamilies[] = {
    {AF_UNIX, "local IPC: multiprocessing, X11-less GUI toolkits, language servers"},
    {AF_INET, "loopback TCP/UDP in the run's own namespace (test servers, asyncio)"},
    {AF_INET6, "as AF_INET"},
    // Only protocol NETLINK_ROUTE (0), which reads and changes the run's own namespace
    // (changes need CAP_NET_ADMIN, which the program has not): glibc's getifaddrs and
    // if_nameindex (Node's os.networkInterfaces, Python's socket.if_nameindex, `ip addr`)
    // use it. Other netlink protocols (sock_diag, generic netlink families, netfilter,
    // uevents) answer EPROTONOSUPPORT, as for a protocol the kernel lacks.
    {AF_NETLINK, "NETLINK_ROUTE only: getifaddrs, if_nameindex"},
};

// Families are ints below AF_MAX (46 as of Linux 6.18, include/linux/socket.h); anything
// larger, and any value with the upper 32 bits set (which the kernel would truncate), is
// refused by one "greater than" rule.
constexpr int kLastSocketFamily = AF_MAX - 1;

// clone(2) flags that create namespaces: refused for the same reason as unshare.
constexpr unsigned long kNamespaceFlags[] = {CLONE_NEWNS,    CLONE_NEWUSER, CLONE_NEWPID,
                                             CLONE_NEWNET,   CLONE_NEWIPC,  CLONE_NEWUTS,
                                             CLONE_NEWCGROUP};

Error SeccompError(const std::string& what, int rc) {
  return MakeError(ErrorKind::kSystem, what + ": " + sys::ErrnoMessage(-rc), -rc);
}

struct CtxDeleter {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};

}  // namespace

SeccompFilter::SeccompFilter(SeccompFilter&& other) noexcept
    : instructions_(std::move(other.instructions_)) {
  program_.len = static_cast<unsigned short>(instructions_.size());
  program_.filter = instructions_.data();
}

namespace {

using Ctx = std::unique_ptr<void, CtxDeleter>;

Status AddRefusedByName(const Ctx& ctx) {
  for (const Rule& rule : kRefused) {
    int nr = seccomp_syscall_resolve_name(rule.name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPERM), nr, 0);
    if (rc < 0) return SeccompError(std::string("seccomp_rule_add(") + rule.name + ")", rc);
  }
  return OkStatus();
}

Status AddNewSyscalls(const Ctx& ctx) {
  for (const NewSyscall& s : kNewSyscalls) {
    if (s.verdict == Verdict::kAllow) continue;  // the default action
    uint32_t action =
        s.verdict == Verdict::kRefuse ? SCMP_ACT_ERRNO(EPERM) : SCMP_ACT_ERRNO(ENOSYS);
    int rc = seccomp_rule_add(ctx.get(), action, s.nr, 0);
    if (rc < 0) return SeccompError(std::string("seccomp_rule_add(") + s.name + ")", rc);
  }
  return OkStatus();
}

Status AddNamespaceAndPersonalityRules(const Ctx& ctx) {
  for (unsigned long flag : kNamespaceFlags) {
    const scmp_arg_cmp has_flag{0, SCMP_CMP_MASKED_EQ, flag, flag};
    int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1, has_flag);
    if (rc < 0) return SeccompError("seccomp_rule_add(clone namespace flag)", rc);
  }
  // personality(2): only PER_LINUX and the 0xffffffff query; other personalities change
  // the ABI (READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE) under the filter's feet.
  // Comparisons spelled out: SCMP_A0() leaves datum_b to the compiler (clang warns).
  const scmp_arg_cmp not_linux{0, SCMP_CMP_NE, 0, 0};
  const scmp_arg_cmp not_query{0, SCMP_CMP_NE, 0xffffffffu, 0};
  int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 2, not_linux,
                            not_query);
  if (rc < 0) {
    // Older libseccomp refuses two comparisons on one argument: allow only the query.
    rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1, not_query);
    if (rc < 0) return SeccompError("seccomp_rule_add(personality)", rc);
  }
  return OkStatus();
}

bool SocketFamilyAllowed(int family) {
  for (const SocketFamily& f : kSocketFamilies) {
    if (f.family == family) return true;
  }
  return false;
}

// socket(2) and socketpair(2) take the family as argument 0 on every architecture this
// builds for (no socketcall(2) multiplexer on x86_64 or aarch64; i386 is killed). libseccomp
// 2.5 allows one comparison per argument in a rule, so a rule per refused family, plus one
// for every value above the last family (the full 64 bits are compared: a family with upper
// bits set, which the kernel would truncate to an allowed one, is refused too).
Status AddSocketRules(const Ctx& ctx) {
  const uint32_t refuse = SCMP_ACT_ERRNO(EAFNOSUPPORT);
  for (int nr : {SCMP_SYS(socket), SCMP_SYS(socketpair)}) {
    for (int family = 0; family <= kLastSocketFamily; ++family) {
      if (SocketFamilyAllowed(family)) continue;
      const scmp_arg_cmp is_family{0, SCMP_CMP_EQ, static_cast<scmp_datum_t>(family), 0};
      int rc = seccomp_rule_add(ctx.get(), refuse, nr, 1, is_family);
      if (rc < 0) return SeccompError("seccomp_rule_add(socket family)", rc);
    }
    const scmp_arg_cmp above{0, SCMP_CMP_GT, static_cast<scmp_datum_t>(kLastSocketFamily), 0};
    int rc = seccomp_rule_add(ctx.get(), refuse, nr, 1, above);
    if (rc < 0) return SeccompError("seccomp_rule_add(socket family above AF_MAX)", rc);
  }
  const scmp_arg_cmp netlink{0, SCMP_CMP_EQ, AF_NETLINK, 0};
  const scmp_arg_cmp not_route{2, SCMP_CMP_NE, NETLINK_ROUTE, 0};
  int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPROTONOSUPPORT), SCMP_SYS(socket), 2,
                            netlink, not_route);
  if (rc < 0) return SeccompError("seccomp_rule_add(netlink protocol)", rc);
  return OkStatus();
}

// Classic BPF run before libseccomp's program: a native-ABI syscall numbered above
// kNewSyscalls' last entry answers ENOSYS (a syscall of a newer kernel than this table, which
// libc treats as "not there" and falls back from). Other ABIs, and x32 numbers (bit 30 set,
// arch x86_64), fall through to libseccomp's program, which kills them. cBPF jumps are
// relative, so libseccomp's program works unchanged behind these instructions.
std::vector<sock_filter> UnknownSyscallGuard(uint32_t native_arch) {
  constexpr uint32_t kX32SyscallBit = 0x40000000;
  const uint32_t last = static_cast<uint32_t>(std::end(kNewSyscalls)[-1].nr);
  return {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, native_arch, 0, 4),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, kX32SyscallBit, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, last, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
  };
}

// libseccomp's program as instructions (it exports only to an fd).
Result<std::vector<sock_filter>> Export(const Ctx& ctx) {
  sys::UniqueFd memfd(static_cast<int>(::syscall(SYS_memfd_create, "seccomp-bpf", MFD_CLOEXEC)));
  if (!memfd.valid()) return sys::ErrnoError("memfd_create");
  int rc = seccomp_export_bpf(ctx.get(), memfd.get());
  if (rc < 0) return SeccompError("seccomp_export_bpf", rc);
  off_t size = ::lseek(memfd.get(), 0, SEEK_END);
  if (size <= 0 || size % sizeof(sock_filter) != 0) {
    return MakeError(ErrorKind::kSystem,
                     "seccomp_export_bpf wrote " + std::to_string(size) + " bytes");
  }
  std::vector<sock_filter> out(static_cast<size_t>(size) / sizeof(sock_filter));
  if (::pread(memfd.get(), out.data(), static_cast<size_t>(size), 0) != size) {
    return sys::ErrnoError("pread exported filter");
  }
  return out;
}

}  // namespace

Result<SeccompFilter> SeccompFilter::Compile() {
  Ctx ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx) return MakeError(ErrorKind::kSystem, "seccomp_init failed");
  // Other ABIs (i386 via int 0x80, x32) could reach syscalls by other numbers: kill.
  int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  if (rc < 0) return SeccompError("seccomp_attr_set(ACT_BADARCH)", rc);
  // The launcher sets no_new_privs itself, before loading.
  rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_NNP, 0);
  if (rc < 0) return SeccompError("seccomp_attr_set(CTL_NNP)", rc);

  for (auto add :
       {AddRefusedByName, AddNewSyscalls, AddNamespaceAndPersonalityRules, AddSocketRules}) {
    if (Status s = add(ctx); !s.ok()) return s.error();
  }
  auto exported = Export(ctx);
  if (!exported.ok()) return exported.error();
  // SCMP_ARCH_* values are the kernel's AUDIT_ARCH_* (seccomp_data.arch).
  SeccompFilter filter;
  filter.instructions_ = UnknownSyscallGuard(seccomp_arch_native());
  filter.instructions_.insert(filter.instructions_.end(), exported->begin(), exported->end());
  if (filter.instructions_.size() > BPF_MAXINSNS) {
    return MakeError(ErrorKind::kSystem, "filter has " +
                                             std::to_string(filter.instructions_.size()) +
                                             " instructions, more than BPF_MAXINSNS");
  }
  filter.program_.len = static_cast<unsigned short>(filter.instructions_.size());
  filter.program_.filter = filter.instructions_.data();
  return filter;
}

}  // namespace sandrun::sandbox
