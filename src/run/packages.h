// Packages and network in the run pipeline: what pip inside the
// sandbox is told by the config, which steps are install steps (their own budget), and the
// line that explains a failed install when the run has no network.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"

namespace sandrun::run {

// PIP_INDEX_URL, PIP_EXTRA_INDEX_URL and PIP_TRUSTED_HOST (space-separated lists, as pip
// reads them) for the keys the config sets; nothing for those it leaves empty. Pure.
std::vector<std::string> PipEnv(const config::Config& config);

// True when a shell step installs Python packages (pip/pip3/python -m pip install, as
// markdown/shell_script.h recognises them). Pure.
bool IsInstallCode(const std::string& shell_code);

// True when a shell step does nothing but install index packages (run/install_step.h
// ParsePureInstall): only such a step gets the install budget (install_wall_time_s of wall
// and CPU time, install_disk_mb), so neither a program nor a pip of the workspace, a path,
// a requirements file or a URL can buy that budget by adding a `pip install` line. Pure.
bool IsInstallOnlyCode(const std::string& shell_code);

// The shell commands of a notebook cell's `%pip install ...`, `!pip install ...` and bare
// `pip install ...` lines (IPython's automagic), what a stateful run's kernel runs through
// pip, the `%`/`!` removed, one a line; "" when the cell has none. Pure.
std::string CellInstallCode(const std::string& python_cell);

// The distribution names of every `pip install` command in `shell_code`, in order, without
// version specifiers, extras, options or their values, requirement files and paths/URLs
// (which name no package). Pure.
std::vector<std::string> RequestedPackages(const std::string& shell_code);

// PEP 503 normalised name: lower case, runs of '-', '_', '.' as one '-'. Pure.
std::string NormalizePackageName(const std::string& name);

// Whether pip's output says the step could not find a package (no index reachable):
// "No matching distribution found" or "Could not find a version that satisfies". Pure.
bool PipFoundNothing(const std::string& output);

// The packages of `requested` that are installed: named by pip's "Requirement already
// satisfied: NAME" lines in `pip_output`, or present in one of `site_dirs` as
// NAME-VERSION.dist-info / .egg-info (the host's /usr that runs inside). Reads the directories.
std::vector<std::string> AvailablePackages(const std::vector<std::string>& requested,
                                           const std::string& pip_output,
                                           const std::vector<std::string>& site_dirs);

// The host's directories of Python distributions, as the sandbox sees them (same paths):
// sandbox::HostPythonSiteDirs(), the one probe of the host's Python.
std::vector<std::string> HostSiteDirs();

// The stderr line of part 3: why pip found nothing (config `network` is "off": the network
// is off for runs on this server; "on_request": this run did not ask for it), which of
// `requested` are already available, and what the user or the admin can do. One line. Pure.
std::string NetworkOffNote(const std::vector<std::string>& requested,
                           const std::vector<std::string>& available,
                           const std::string& network_mode);

// The stderr line for a run WITH the network whose pip found nothing because it could not
// reach its package index (pip's output shows connection or name-resolution failures, or an
// http index it ignored as untrusted): says which index (pip's "Looking in indexes:", else
// `config`'s pip_index_url, else PyPI),
// what failed, that "from versions: none" then says nothing about the package, and which keys
// the server's admin can set. "" when the output shows no such failure. One line. Pure.
std::string IndexUnreachableNote(const std::string& pip_output, const config::Config& config);

}  // namespace sandrun::run
