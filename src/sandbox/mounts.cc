#include "sandbox/mounts.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "sandbox/init_plan.h"
#include "sys/syscalls.h"
#include "sys/tree_walk.h"

namespace sandrun::sandbox {
namespace {

constexpr unsigned long kSafe = MS_NOSUID | MS_NODEV;

// The flags of the mount that `host_path` is on (statvfs(3) f_flag) as mount(2) flags, of
// those a bind below cares about; 0 when they cannot be read.
unsigned long MountFlagsOf(const std::string& host_path) {
  struct statvfs vfs;
  if (::statvfs(host_path.c_str(), &vfs) != 0) return 0;
  constexpr std::pair<unsigned long, unsigned long> kFlags[] = {
      {ST_RDONLY, MS_RDONLY},    {ST_NOSUID, MS_NOSUID},   {ST_NODEV, MS_NODEV},
      {ST_NOEXEC, MS_NOEXEC},    {ST_NOATIME, MS_NOATIME}, {ST_NODIRATIME, MS_NODIRATIME},
      {ST_RELATIME, MS_RELATIME}};
  unsigned long flags = 0;
  for (const auto& [st, ms] : kFlags) {
    if (vfs.f_flag & st) flags |= ms;
  }
  return flags;
}

class PlanBuilder {
 public:
  PlanBuilder(MountPlan& plan, std::string root) : plan_(plan), root_(std::move(root)) {}

  const char* Keep(std::string s) {
    plan_.strings.push_back(std::move(s));
    return plan_.strings.back().c_str();
  }
  void Add(MountOp op, const std::string& source, const std::string& inside, unsigned long flags,
           const std::string& data, std::string description) {
    const char* d = Keep(data);
    plan_.steps.push_back(MountStep{op, Keep(source), Keep(root_ + inside), flags, d, data.size()});
    plan_.descriptions.push_back(std::move(description));
  }
  void Mkdir(const std::string& inside) {
    Add(MountOp::kMkdir, "", inside, 0, "", "mkdir " + inside);
  }
  void Symlink(const std::string& to, const std::string& inside) {
    Add(MountOp::kSymlink, to, inside, 0, "", "symlink " + inside + " -> " + to);
  }
  void File(const std::string& inside, const std::string& content) {
    Add(MountOp::kFile, "", inside, 0, content, "write " + inside);
  }
  void Tmpfs(const std::string& inside, unsigned long flags, const std::string& options) {
    // `source` "": the kernel's name for it is "tmpfs" (RunMountStep).
    Add(MountOp::kTmpfs, "", inside, flags, options, "tmpfs on " + inside + " (" + options + ")");
  }
  void Bind(const std::string& host, const std::string& inside, unsigned long flags) {
    // A bind mount starts with its source mount's flags: the remount that sets `flags` is
    // needed only when the source lacks one of them (the workspace's tmpfs, say, is nosuid
    // and nodev already: run/run_dir.cc). One mount(2) call less per such bind and run.
    constexpr unsigned long kAccess = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
    const bool remount = (flags & kAccess & ~MountFlagsOf(host)) != 0;
    Add(remount ? MountOp::kBind : MountOp::kBindOnly, host, inside, flags, "",
        "bind " + host + " on " + inside);
  }

 private:
  MountPlan& plan_;
  std::string root_;
};

// Flags a bind remount must keep: the ones the source mount has that a user namespace
// cannot clear (locked mount flags, mount_namespaces(7)).
unsigned long LockedFlags(const std::string& host_path) {
  return MountFlagsOf(host_path) &
         (MS_NOEXEC | MS_NOATIME | MS_NODIRATIME | MS_RELATIME | MS_NODEV);
}

// Adds `host` (a path such as /usr or /etc/ssl) at the same place inside: symlink, dir or
// file, read-only.
void AddHostPath(PlanBuilder& b, const std::string& host) {
  struct stat st;
  if (::lstat(host.c_str(), &st) != 0) return;  // absent on this host: nothing to bind
  if (S_ISLNK(st.st_mode)) {
    char target[4096];
    ssize_t n = ::readlink(host.c_str(), target, sizeof target - 1);
    if (n <= 0) return;
    b.Symlink(std::string(target, static_cast<size_t>(n)), host);
    return;
  }
  if (S_ISDIR(st.st_mode)) {
    b.Mkdir(host);
  } else if (S_ISREG(st.st_mode)) {
    b.File(host, "");
  } else {
    return;
  }
  b.Bind(host, host, MS_RDONLY | MS_NOSUID | MS_NODEV | LockedFlags(host));
}

std::string Passwd() {
  const std::string user = "user:x:" + std::to_string(kInsideUid) + ":" +
                           std::to_string(kInsideGid) + ":sandbox user:/home/user:/bin/bash\n";
  return "root:x:0:0:root:/root:/usr/sbin/nologin\n" + user +
         "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
}

std::string Group() {
  return "root:x:0:\nuser:x:" + std::to_string(kInsideGid) + ":\nnogroup:x:65534:\n";
}

// Options of a tmpfs the sandbox user may write anywhere in (sticky, like any /tmp).
std::string SharedTmpfsOptions(const std::string& size) {
  return "size=" + size + ",mode=1777,uid=" + std::to_string(kInsideUid) +
         ",gid=" + std::to_string(kInsideGid);
}

// A minimal /dev: host device nodes bound onto empty files (mknod is not allowed in a user
// namespace, and nodes on the template would serve no one else); no tty, no ptmx.
void AddDev(PlanBuilder& b) {
  b.Tmpfs("/dev", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755");
  for (const char* dev : {"null", "zero", "full", "random", "urandom"}) {
    std::string inside = std::string("/dev/") + dev;
    b.File(inside, "");
    b.Bind(inside, inside, MS_NOSUID | MS_NOEXEC | LockedFlags(inside));
  }
  b.Symlink("/proc/self/fd", "/dev/fd");
  b.Symlink("/proc/self/fd/0", "/dev/stdin");
  b.Symlink("/proc/self/fd/1", "/dev/stdout");
  b.Symlink("/proc/self/fd/2", "/dev/stderr");
  b.Mkdir("/dev/shm");
}

// Replaces every `from` in `text` by `to`; the number replaced.
size_t ReplaceAll(std::string& text, const std::string& from, const std::string& to) {
  size_t n = 0;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
    ++n;
  }
  return n;
}

// Names in directory `dir` (none when it cannot be read).
// Names in directory `dir`, at most 4096 (none when it cannot be read).
std::vector<std::string> NamesIn(const std::string& dir) {
  sys::UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  bool truncated = false;
  auto names = fd.valid() ? sys::ListDir(fd.get(), 4096, &truncated)
                          : Result<std::vector<std::string>>(std::vector<std::string>{});
  return names.ok() ? std::move(*names) : std::vector<std::string>{};
}

// Copies of the system's *-nspkg.pth files that import nothing (LeanNamespacePth), each
// bound read-only over its original, which stays on the host untouched.
void AddLeanNamespacePths(PlanBuilder& b, const std::string& root) {
  const std::string dir = "/run/sandrun/pth";
  bool made = false;
  int index = 0;
  for (const std::string& path : SystemNamespacePths()) {
    auto text = sys::ReadFile(path, 64 << 10);
    if (!text.ok()) continue;
    const std::string lean = LeanNamespacePth(*text);
    if (lean.empty()) continue;
    if (!made) b.Mkdir(dir);
    made = true;
    const std::string copy =
        dir + "/" + std::to_string(index++) + "-" + path.substr(path.rfind('/') + 1);
    b.File(copy, lean);
    b.Bind(root + copy, path, MS_RDONLY | kSafe | LockedFlags(path));
  }
}

}  // namespace

std::string LeanNamespacePth(const std::string& text) {
  std::string lean = text;
  const size_t n =
      ReplaceAll(lean, "__import__('importlib.util')", "__import__('_frozen_importlib')");
  if (n == 0 ||
      ReplaceAll(lean, "importlib.util.module_from_spec(", "importlib.module_from_spec(") != n ||
      ReplaceAll(lean, "__import__('importlib.machinery')",
                 "__import__('_frozen_importlib_external')") != n ||
      ReplaceAll(lean, "importlib.machinery.PathFinder",
                 "sys.modules['_frozen_importlib_external'].PathFinder") != n ||
      lean.find("importlib.util") != std::string::npos ||
      lean.find("importlib.machinery") != std::string::npos) {
    return "";
  }
  return lean;
}

std::vector<std::string> HostPythonVersions() {
  std::vector<std::string> versions;
  for (const char* lib : {"/usr/lib", "/usr/local/lib"}) {
    for (const std::string& name : NamesIn(lib)) {
      if (name.rfind("python3.", 0) == 0) versions.push_back(name);
    }
  }
  std::sort(versions.begin(), versions.end());
  versions.erase(std::unique(versions.begin(), versions.end()), versions.end());
  return versions;
}

std::vector<std::string> HostPythonSiteDirs() {
  std::vector<std::string> dirs = {"/usr/lib/python3/dist-packages"};
  const std::vector<std::string> versions = HostPythonVersions();
  for (const char* lib : {"/usr/lib", "/usr/local/lib"}) {
    for (const std::string& name : versions) {
      for (const char* sub : {"/dist-packages", "/site-packages"}) {
        dirs.push_back(std::string(lib) + "/" + name + sub);
      }
    }
  }
  return dirs;
}

std::vector<std::string> SystemNamespacePths() {
  const std::vector<std::string> dirs = HostPythonSiteDirs();
  constexpr std::string_view kSuffix = "-nspkg.pth";
  std::vector<std::string> paths;
  for (const std::string& dir : dirs) {
    for (const std::string& name : NamesIn(dir)) {
      if (name.size() <= kSuffix.size() ||
          name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
        continue;
      }
      // A regular file reached through no symlink: the template mounts on this path under its
      // root on the host, where a symlink would lead out of the template.
      struct stat st;
      const std::string path = dir + "/" + name;
      char* real = ::realpath(path.c_str(), nullptr);
      const bool direct = real != nullptr && path == real;
      ::free(real);
      if (direct && ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) paths.push_back(path);
    }
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

const std::vector<std::string>& SystemBinds() {
  static const std::vector<std::string> kBinds = {"/usr",   "/bin",   "/sbin",  "/lib",
                                                  "/lib32", "/lib64", "/libx32"};
  return kBinds;
}

const std::vector<std::string>& EtcEntries() {
  static const std::vector<std::string> kEtc = [] {
    std::vector<std::string> etc = {
        "/etc/alternatives", "/etc/ssl",          "/etc/ca-certificates", "/etc/ld.so.cache",
        "/etc/ld.so.conf",   "/etc/ld.so.conf.d", "/etc/localtime",       "/etc/nsswitch.conf",
        "/etc/hosts",        "/etc/mime.types",   "/etc/matplotlibrc",    "/etc/fonts",
        "/etc/python3",      "/etc/bash.bashrc",  "/etc/inputrc",         "/etc/magic",
        "/etc/magic.mime",   "/etc/timezone"};
    for (const std::string& version : HostPythonVersions()) etc.push_back("/etc/" + version);
    return etc;
  }();
  return kEtc;
}

MountPlan BuildTemplatePlan(const std::string& root, const std::string& name) {
  MountPlan plan;
  plan.root = root;
  plan.put_old = root + "/.oldroot";
  PlanBuilder b(plan, root);
  // A small tmpfs, private at once: the daemon's mount namespace is the host's, whose mounts
  // are usually shared (systemd), and nothing mounted below it may propagate to the host's
  // other namespaces or come back from them (mount_namespaces(7) "Shared subtrees").
  b.Add(MountOp::kTmpfs, name, "", kSafe, "size=1m,mode=0755", "tmpfs on " + root);
  b.Add(MountOp::kMakePrivate, "", "", 0, "", "make " + root + " private");
  // Every mount point of a run's own mounts (BuildMountPlan): nothing can be made later.
  for (const char* dir : {"/etc", "/tmp", "/home", "/home/user", "/mnt", "/proc", "/dev", "/run",
                          "/run/sandrun", kOutputsInside, kEnvironmentInside, "/.oldroot"}) {
    b.Mkdir(dir);
  }
  // The workspace's second name (models trained on ChatGPT write there): a symlink, not a
  // second bind of each run's workspace and of its read-only directories, which cost three
  // mount(2) calls per run and their teardown.
  b.Symlink("/home/user", "/mnt/data");
  for (const auto& path : SystemBinds()) AddHostPath(b, path);
  AddLeanNamespacePths(b, root);
  b.File(kPipConfigInside, kPipConfig);
  for (const auto& path : EtcEntries()) AddHostPath(b, path);
  b.File("/etc/passwd", Passwd());
  b.File("/etc/group", Group());
  b.File("/etc/hostname", "sandbox\n");
  // Empty without the network: a resolver then behaves as with none (resolv.conf(5): the
  // local name server, which the sandbox's loopback does not have).
  b.File("/etc/resolv.conf", "");
  AddDev(b);
  // A bind of a shared host mount joins its peer group: private again, the whole tree.
  b.Add(MountOp::kMakePrivate, "", "", 0, "", "make " + root + " private (binds)");
  b.Add(MountOp::kReadOnly, "", "/dev", MS_NOSUID | MS_NOEXEC, "", "remount /dev read-only");
  b.Add(MountOp::kReadOnly, "", "", kSafe, "", "remount " + root + " read-only");
  return plan;
}

MountPlan BuildMountPlan(const SandboxSpec& spec, const RootTemplatePaths& root) {
  MountPlan plan;
  plan.root = root.root;
  plan.put_old = root.root + "/.oldroot";
  PlanBuilder b(plan, root.root);
  // The template came into the child's namespace as a locked mount (mount_namespaces(7)),
  // which pivot_root(2) refuses (EINVAL: it could not be detached from its parent). Its
  // recursive bind on itself is not locked at the top; the mounts below stay locked, and
  // every mount keeps its locked read-only, nosuid and nodev flags. The run's mounts go on it.
  b.Add(MountOp::kBindOnly, root.root, "", 0, "", "bind the root template on itself");
  const std::string disk = std::to_string(spec.limits.disk_bytes);
  if (spec.tmp_dir.empty()) {
    b.Tmpfs("/tmp", kSafe, SharedTmpfsOptions(disk));
  } else {
    b.Bind(spec.tmp_dir, "/tmp", kSafe);
  }
  // The workspace (a size-limited tmpfs the parent mounted on the host); /mnt/data is the
  // template's symlink to it.
  b.Bind(spec.workspace_dir, "/home/user", kSafe);
  for (const auto& dir : spec.readonly_workspace_dirs) {
    b.Bind(spec.workspace_dir + "/" + dir, "/home/user/" + dir, MS_RDONLY | kSafe);
  }
  if (!spec.outputs_dir.empty()) b.Bind(spec.outputs_dir, kOutputsInside, kSafe | MS_NOEXEC);
  if (!spec.environment_dir.empty()) {
    b.Bind(spec.environment_dir, kEnvironmentInside, kSafe | MS_RDONLY);
  }
  // With the network only: slirp4netns' DNS forwarder (network.h), from the file the
  // template's owner wrote beside it.
  if (spec.network.enabled) {
    b.Bind(root.resolv_conf, "/etc/resolv.conf", MS_RDONLY | kSafe | LockedFlags(root.resolv_conf));
  }
  b.Tmpfs("/dev/shm", kSafe, SharedTmpfsOptions(disk));
  // hidepid=invisible: the program sees only its own uid's processes, not the init (which
  // is a copy of the daemon, argv included). proc(5), Linux 5.8+.
  b.Add(MountOp::kProc, "", "/proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=invisible",
        "mount proc");
  return plan;
}

}  // namespace sandrun::sandbox
