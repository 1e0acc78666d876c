#include "sandbox/seccomp.h"

#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include "sys/syscalls.h"

namespace sandrun::sandbox {
namespace {

// A refused syscall and why. Every rule answers EPERM, so programs see an ordinary
// "Operation not permitted" rather than dying.
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
    {"move_mount", "new mount API: same as mount"},
    {"open_tree", "new mount API: could clone host mounts"},
    {"fsopen", "new mount API: same as mount"},
    {"fsconfig", "new mount API: same as mount"},
    {"fsmount", "new mount API: same as mount"},
    {"fspick", "new mount API: reconfigures mounts"},
    {"mount_setattr", "new mount API: would change read-only flags"},
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
    {"io_uring_setup", "io_uring bypasses seccomp and has a long CVE history"},
    {"io_uring_enter", "io_uring bypasses seccomp and has a long CVE history"},
    {"io_uring_register", "io_uring bypasses seccomp and has a long CVE history"},
    {"acct", "process accounting is host-wide"},
    {"quotactl", "disk quotas are host-wide"},
    {"quotactl_fd", "disk quotas are host-wide"},
    {"syslog", "kernel log leaks host information (dmesg)"},
    {"iopl", "raw I/O port access"},
    {"ioperm", "raw I/O port access"},
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
};

// clone(2) flags that create namespaces: refused for the same reason as unshare.
constexpr unsigned long kNamespaceFlags[] = {CLONE_NEWNS,    CLONE_NEWUSER, CLONE_NEWPID,
                                             CLONE_NEWNET,   CLONE_NEWIPC,  CLONE_NEWUTS,
                                             CLONE_NEWCGROUP};

Error SeccompError(const std::string& what, int rc) {
  return MakeError("seccomp", what + ": " + std::strerror(-rc), -rc);
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

Result<SeccompFilter> SeccompFilter::Compile() {
  std::unique_ptr<void, CtxDeleter> ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx) return MakeError("seccomp", "seccomp_init failed");
  // Other ABIs (i386 via int 0x80, x32) could reach syscalls by other numbers: kill.
  int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  if (rc < 0) return SeccompError("seccomp_attr_set(ACT_BADARCH)", rc);
  // The launcher sets no_new_privs itself, before loading.
  rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_NNP, 0);
  if (rc < 0) return SeccompError("seccomp_attr_set(CTL_NNP)", rc);

  for (const Rule& rule : kRefused) {
    int nr = seccomp_syscall_resolve_name(rule.name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPERM), nr, 0);
    if (rc < 0) return SeccompError(std::string("seccomp_rule_add(") + rule.name + ")", rc);
  }
  for (unsigned long flag : kNamespaceFlags) {
    const scmp_arg_cmp has_flag{0, SCMP_CMP_MASKED_EQ, flag, flag};
    rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1, has_flag);
    if (rc < 0) return SeccompError("seccomp_rule_add(clone namespace flag)", rc);
  }
  // clone3 passes its flags in memory, which seccomp cannot read: answer ENOSYS so libc
  // falls back to clone(2), whose flags are checked above.
  rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  if (rc < 0) return SeccompError("seccomp_rule_add(clone3)", rc);
  // personality(2): only PER_LINUX and the 0xffffffff query; other personalities change
  // the ABI (READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE) under the filter's feet.
  // Comparisons spelled out: SCMP_A0() leaves datum_b to the compiler (clang warns).
  const scmp_arg_cmp not_linux{0, SCMP_CMP_NE, 0, 0};
  const scmp_arg_cmp not_query{0, SCMP_CMP_NE, 0xffffffffu, 0};
  rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 2, not_linux,
                        not_query);
  if (rc < 0) {
    // Older libseccomp refuses two comparisons on one argument: allow only the query.
    rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1, not_query);
    if (rc < 0) return SeccompError("seccomp_rule_add(personality)", rc);
  }

  sys::UniqueFd memfd(static_cast<int>(::syscall(SYS_memfd_create, "seccomp-bpf", MFD_CLOEXEC)));
  if (!memfd.valid()) return sys::ErrnoError("seccomp", "memfd_create");
  rc = seccomp_export_bpf(ctx.get(), memfd.get());
  if (rc < 0) return SeccompError("seccomp_export_bpf", rc);
  off_t size = ::lseek(memfd.get(), 0, SEEK_END);
  if (size <= 0 || size % sizeof(sock_filter) != 0) {
    return MakeError("seccomp", "seccomp_export_bpf wrote " + std::to_string(size) + " bytes");
  }
  SeccompFilter filter;
  filter.instructions_.resize(static_cast<size_t>(size) / sizeof(sock_filter));
  if (::pread(memfd.get(), filter.instructions_.data(), static_cast<size_t>(size), 0) != size) {
    return sys::ErrnoError("seccomp", "pread exported filter");
  }
  filter.program_.len = static_cast<unsigned short>(filter.instructions_.size());
  filter.program_.filter = filter.instructions_.data();
  return filter;
}

int LoadSeccompInChild(const sock_fprog* program) {
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, program) != 0) {
    return sys::LastErrno();
  }
  return 0;
}

}  // namespace sandrun::sandbox
