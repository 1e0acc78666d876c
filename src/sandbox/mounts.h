// Parent side of the mount namespace (DESIGN.md §3 "File system"), as lists of MountSteps:
// the root template's, built once on the host (root_template.h), and each run's, which the
// child runs on the template's mount points in its own mount namespace.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "sandbox/child.h"
#include "sandbox/spec.h"

namespace sandrun::sandbox {

// Owns the strings the steps point to.
struct MountPlan {
  std::deque<std::string> strings;  // deque: stable addresses while growing
  std::vector<MountStep> steps;
  std::vector<std::string> descriptions;  // one per step, for error messages
  std::string root;                       // host path of the root the steps build on
  std::string put_old;                    // root + "/.oldroot" (pivot_root(2))
};

// Where a run's root comes from on the host (RootTemplate::paths()).
struct RootTemplatePaths {
  std::string root;         // the template's mount point: the new root of every sandbox
  std::string resolv_conf;  // a file outside the template: /etc/resolv.conf with the network
};

// Host paths bound read-only into the sandbox (when present on the host); symlinks (merged
// /usr: /bin -> usr/bin) are recreated as symlinks.
const std::vector<std::string>& SystemBinds();
// /etc entries interpreters need (DESIGN.md §3), bound read-only when present: /etc/python3
// and /etc/python3.X of each HostPythonVersions() among them.
const std::vector<std::string>& EtcEntries();

// The one probe of the host's Python: the python3.X directories under /usr/lib and
// /usr/local/lib ("python3.11"), sorted, each once.
std::vector<std::string> HostPythonVersions();

// The host's directories of Python distributions, as the sandbox sees them (same paths):
// /usr/lib/python3/dist-packages, then /usr/lib/python3.X/{dist,site}-packages and the same
// under /usr/local for each HostPythonVersions(), present or not.
std::vector<std::string> HostPythonSiteDirs();

// pip's configuration for runs (PIP_CONFIG_FILE, run/run_steps.cc): `pip install` goes to the
// user site (~/.local) as users type it, while `pip list` and `pip freeze` still see every
// package (PIP_USER=1, used before, applied --user to them too: they listed nothing). In the
// root template, read-only.
constexpr char kPipConfigInside[] = "/run/sandrun/pip.conf";
constexpr char kPipConfig[] = "[install]\nuser = true\n";

// setuptools' namespace-package line (setuptools/namespaces.py `_nspkg_tmpl`), as Debian's
// python3-matplotlib ships it in matplotlib-*-nspkg.pth: site.py runs it at every interpreter
// start, and its __import__('importlib.util') and ('importlib.machinery') load about ten
// modules (7 ms of a 28 ms `python3 -c pass` on the benchmark machine). Returns
// `text` with those two names replaced by the interpreter's own frozen modules that define
// the same functions (importlib.util.module_from_spec is _frozen_importlib.module_from_spec,
// importlib.machinery.PathFinder is _frozen_importlib_external.PathFinder): the line then
// makes the same module, with the same __spec__ and __path__, importing nothing. Returns ""
// when `text` is not that template (the file is then left as it is). Pure.
std::string LeanNamespacePth(const std::string& text);

// The *-nspkg.pth files of the system's Python site directories (/usr/lib/python3/dist-packages,
// /usr/lib/python3.X/{dist,site}-packages and the same under /usr/local): host paths, sorted.
std::vector<std::string> SystemNamespacePths();

// The root template at `root` (an empty directory on the host): what every sandbox's root has,
// made by the host's root: a tmpfs with the mount points of the run's own mounts (/tmp,
// /home/user, /proc, /dev/shm, the outputs and environment areas, an empty
// /etc/resolv.conf, /.oldroot), /mnt/data as a symlink to /home/user, the read-only, nosuid,
// nodev binds of SystemBinds() (with LeanNamespacePth copies of SystemNamespacePths() bound
// over the originals, under /run/sandrun/pth) and
// EtcEntries(), /etc/passwd, /etc/group, /etc/hostname, and /dev with its devices; then
// made private and read-only. The first step mounts the tmpfs named `name` on `root`.
// Reads the host (lstat, readlink, statvfs) to choose between bind, symlink and skip, and to
// keep each source mount's flags that a user namespace could not clear (mount(2) EPERM).
// Not child-safe.
MountPlan BuildTemplatePlan(const std::string& root, const std::string& name);

// The run's own mounts for `spec` on the template's mount points: the workspace at both of
// its names (and its read-only directories), /tmp, the outputs and environment areas,
// /dev/shm, proc, and /etc/resolv.conf with the network. Nothing is created: the template
// (read-only) has every mount point already. Not child-safe.
MountPlan BuildMountPlan(const SandboxSpec& spec, const RootTemplatePaths& root);

}  // namespace sandrun::sandbox
