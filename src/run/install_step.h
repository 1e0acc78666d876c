// Install steps: which shell steps are nothing but pip installs of index requirements (the
// only ones that run on the install budget, install_wall_time_s and install_disk_mb, or are
// answered from a prepared environment), and the script the sandbox runs for one. Pure.
//
// The budget is for pip fetching packages from the configured index, not for the run's own
// code: so pip is started isolated from the workspace (`python3 -I`: no user site and its
// .pth files, no PYTHONPATH, no working directory on its import path, so a pip.py or pip/
// placed there is not imported), from the system's path, in a read-only directory, without
// the workspace's pip cache, and its arguments are index requirements of run/requirements.h's
// grammar and a few options that change nothing but pip's output and choices among index
// packages. A path, a URL, a requirements file, an index option, an environment variable or
// a pip of the workspace (./pip) makes the step an ordinary program, on the run's limits.
#pragma once

#include <string>
#include <vector>

namespace sandrun::run {

// The directory an install step runs in and its HOME: read-only, made by the daemon (the
// root template's /run/sandrun, which holds pip's configuration, sandbox/mounts.h).
inline constexpr char kInstallHome[] = "/run/sandrun";

struct PureInstall {
  // The canonical texts (run/requirements.h) of every requirement of the step, in order of
  // first appearance, without duplicates.
  std::vector<std::string> requirements;
  // What the sandbox runs instead of the step's text (bash): each pip install as
  // `/usr/bin/python3 -I -m pip install --user --no-cache-dir ... -- 'req' ...`, joined as the
  // step joined them (lines, `;`, `&&`, `||`), after `cd` to kInstallHome.
  std::string script;
};

// "" and fills `out` (when not null) when every line of `shell_code` that runs something is
// `pip install` commands (pip, pip3, pip3.N, or python, python3, python3.N with `-m pip`; an
// optional `sudo` before) joined by `;`, `&&` or `||`, perhaps with `cd` (dropped: pip's
// working directory is kInstallHome), each with at least one requirement of the strict
// grammar, options only of the allowed list (-q, -v, -U and their --long forms, --user,
// --pre, --no-deps, --force-reinstall, --prefer-binary, --no-cache-dir,
// --break-system-packages, --disable-pip-version-check, --no-warn-script-location,
// --no-input, --no-color) and no redirection to a file or heredoc. Otherwise why not: a
// phrase for the plan's reason and the step's note, quoting at most 60 bytes of the step.
std::string ParsePureInstall(const std::string& shell_code, PureInstall* out);

// The canonical requirements of a pure install step; empty when it is not one.
std::vector<std::string> InstallRequirements(const std::string& shell_code);

// Whether a request for `want` (a canonical requirement text) is met by an environment built
// from `have` (canonical texts): `want` is one of them, or `want` is a bare name (no extras,
// no version) and one of them names that package (whatever version or extras the set chose).
bool RequirementCovered(const std::string& want, const std::vector<std::string>& have);

}  // namespace sandrun::run
