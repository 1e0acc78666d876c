#include "run/packages.h"

#include <dirent.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "markdown/shell_script.h"
#include "run/install_step.h"
#include "sandbox/mounts.h"

namespace sandrun::run {
namespace {

std::string Join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : sep) + item;
  return out;
}

// pip install options that take a value as the next word.
bool TakesValue(const std::string& option) {
  static const std::set<std::string> kWithValue = {"-r",
                                                   "--requirement",
                                                   "-c",
                                                   "--constraint",
                                                   "-e",
                                                   "--editable",
                                                   "-t",
                                                   "--target",
                                                   "-i",
                                                   "--index-url",
                                                   "--extra-index-url",
                                                   "-f",
                                                   "--find-links",
                                                   "--trusted-host",
                                                   "--prefix",
                                                   "--root",
                                                   "--platform",
                                                   "--python-version",
                                                   "--implementation",
                                                   "--abi",
                                                   "--src",
                                                   "--upgrade-strategy",
                                                   "--progress-bar",
                                                   "--log",
                                                   "--cache-dir",
                                                   "--proxy",
                                                   "--timeout",
                                                   "--retries",
                                                   "--exists-action",
                                                   "--cert",
                                                   "--client-cert",
                                                   "--config-settings",
                                                   "-C",
                                                   "--global-option",
                                                   "--no-binary",
                                                   "--only-binary",
                                                   "--report",
                                                   "--python",
                                                   "--root-user-action",
                                                   "--keyring-provider",
                                                   "--use-feature",
                                                   "--use-deprecated",
                                                   "--log-file",
                                                   "--progress"};
  return kWithValue.count(option) > 0;
}

std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  std::string w;
  while (in >> w) {
    w.erase(std::remove(w.begin(), w.end(), '"'), w.end());
    w.erase(std::remove(w.begin(), w.end(), '\''), w.end());
    if (!w.empty()) words.push_back(w);
  }
  return words;
}

// The name part of a requirement word ("pandas>=2[excel]" -> "pandas"), or "" for a path,
// URL or archive, which names no package.
std::string RequirementName(const std::string& word) {
  if (word.find('/') != std::string::npos || word.find(':') != std::string::npos) return "";
  const size_t end = word.find_first_of("<>=!~[;@ ");
  std::string name = word.substr(0, end);
  const bool plain = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
  if (!plain) return "";
  for (const char* archive : {".whl", ".zip", ".tar.gz", ".tgz"}) {
    const std::string a(archive);
    if (name.size() > a.size() && name.compare(name.size() - a.size(), a.size(), a) == 0) {
      return "";
    }
  }
  return name;
}

}  // namespace

std::vector<std::string> PipEnv(const config::Config& config) {
  std::vector<std::string> env;
  if (!config.pip_index_url.empty()) env.push_back("PIP_INDEX_URL=" + config.pip_index_url);
  if (!config.pip_extra_index_urls.empty()) {
    env.push_back("PIP_EXTRA_INDEX_URL=" + Join(config.pip_extra_index_urls, " "));
  }
  if (!config.pip_trusted_hosts.empty()) {
    env.push_back("PIP_TRUSTED_HOST=" + Join(config.pip_trusted_hosts, " "));
  }
  return env;
}

bool IsInstallCode(const std::string& shell_code) {
  for (const auto& line : markdown::AnalyzeShell(shell_code).lines) {
    for (const auto& cmd : line.commands) {
      if (cmd.kind == markdown::CommandKind::kInstall) return true;
    }
  }
  return false;
}

bool IsInstallOnlyCode(const std::string& shell_code) {
  return ParsePureInstall(shell_code, nullptr).empty();
}

std::string CellInstallCode(const std::string& python_cell) {
  std::string out;
  std::istringstream lines(python_cell);
  for (std::string line; std::getline(lines, line);) {
    size_t at = line.find_first_not_of(" \t");
    if (at == std::string::npos) continue;
    if (line[at] == '%' || line[at] == '!') {
      at = line.find_first_not_of(" \t", at + 1);
      if (at == std::string::npos) continue;
    } else if (line.compare(at, 4, "pip ") != 0) {
      continue;  // Python; a bare `pip install x` is IPython's automagic %pip
    }
    const std::string command = line.substr(at);
    if (IsInstallCode(command)) out += command + "\n";
  }
  return out;
}

std::vector<std::string> RequestedPackages(const std::string& shell_code) {
  std::vector<std::string> out;
  for (const auto& line : markdown::AnalyzeShell(shell_code).lines) {
    for (const auto& cmd : line.commands) {
      if (cmd.kind != markdown::CommandKind::kInstall) continue;
      const std::vector<std::string> w = Words(line.text.substr(cmd.begin, cmd.end - cmd.begin));
      auto at = std::find(w.begin(), w.end(), "install");
      if (at == w.end()) continue;
      for (auto it = at + 1; it != w.end(); ++it) {
        if ((*it)[0] == '-') {
          if (TakesValue(*it) && it + 1 != w.end()) ++it;
          continue;
        }
        std::string name = RequirementName(*it);
        if (!name.empty() && std::find(out.begin(), out.end(), name) == out.end()) {
          out.push_back(name);
        }
      }
    }
  }
  return out;
}

std::string NormalizePackageName(const std::string& name) {
  std::string out;
  for (const char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      if (out.empty() || out.back() != '-') out.push_back('-');
    } else {
      out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
  }
  return out;
}

bool PipFoundNothing(const std::string& output) {
  return output.find("No matching distribution found") != std::string::npos ||
         output.find("Could not find a version that satisfies") != std::string::npos;
}

std::vector<std::string> AvailablePackages(const std::vector<std::string>& requested,
                                           const std::string& pip_output,
                                           const std::vector<std::string>& site_dirs) {
  std::set<std::string> present;
  const std::string satisfied = "Requirement already satisfied: ";
  for (size_t at = pip_output.find(satisfied); at != std::string::npos;
       at = pip_output.find(satisfied, at + 1)) {
    const size_t start = at + satisfied.size();
    const size_t end = pip_output.find_first_of(" <>=!~[;\n", start);
    present.insert(NormalizePackageName(pip_output.substr(start, end - start)));
  }
  for (const std::string& dir : site_dirs) {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) continue;
    while (const dirent* e = ::readdir(d)) {
      const std::string entry = e->d_name;
      for (const char* suffix : {".dist-info", ".egg-info"}) {
        const std::string s(suffix);
        if (entry.size() <= s.size() || entry.compare(entry.size() - s.size(), s.size(), s) != 0) {
          continue;
        }
        // NAME-VERSION.dist-info; NAME has '_' for '-' (the wheel spec's escaping).
        const std::string stem = entry.substr(0, entry.size() - s.size());
        present.insert(NormalizePackageName(stem.substr(0, stem.find('-'))));
      }
    }
    ::closedir(d);
  }
  std::vector<std::string> out;
  for (const std::string& name : requested) {
    if (present.count(NormalizePackageName(name)) > 0) out.push_back(name);
  }
  return out;
}

std::vector<std::string> HostSiteDirs() { return sandbox::HostPythonSiteDirs(); }

std::string NetworkOffNote(const std::vector<std::string>& requested,
                           const std::vector<std::string>& available,
                           const std::string& network_mode) {
  std::vector<std::string> missing;
  for (const std::string& name : requested) {
    if (std::find(available.begin(), available.end(), name) == available.end()) {
      missing.push_back(name);
    }
  }
  const bool on_request = network_mode == "on_request";
  std::string note =
      on_request ? "sandrun: this run has no network (the server gives it to runs that ask: "
                   "send \"network\": true), so pip cannot download packages."
                 : "sandrun: the network is off for runs on this server, so pip cannot "
                   "download packages.";
  note += " Already available: " + (available.empty() ? "none" : Join(available, ", ")) + ".";
  if (!missing.empty()) note += " Not available: " + Join(missing, ", ") + ".";
  note += on_request ? " Or name them in the request's \"packages\" (a prepared environment)."
                     : " What the server's admin can do: allow the network (config \"network\": "
                       "\"on_request\" or \"always\"; then ask with \"network\": true), point "
                       "\"pip_index_url\" at a package mirror the runs may reach, or prepare an "
                       "environment: list the packages in \"environments_prebuild\" (requests "
                       "name them in \"packages\"), or install them on the host "
                       "(scripts/packages/batteries.txt).";
  return note;
}

namespace {

// What pip's output says failed on the way to its index, as a phrase; "" when nothing did.
// The texts are urllib3's and the resolver's, as pip 23 prints them in its retry warnings and
// "Could not fetch URL" lines.
std::string IndexFailure(const std::string& output) {
  auto has = [&output](const char* text) { return output.find(text) != std::string::npos; };
  if (has("Temporary failure in name resolution") || has("Name or service not known") ||
      has("NameResolutionError") || has("No address associated with hostname")) {
    return "its host name did not resolve";
  }
  if (has("Connection refused")) return "the connection was refused";
  if (has("Network is unreachable") || has("No route to host")) {
    return "the network is unreachable from the runs";
  }
  if (has("ConnectTimeoutError") || has("ReadTimeoutError") || has("timed out")) {
    return "the connection timed out";
  }
  if (has("ProxyError")) return "the proxy failed";
  if (has("SSLError") || has("CERTIFICATE_VERIFY_FAILED")) return "its TLS certificate failed";
  if (has("NewConnectionError") || has("Failed to establish a new connection") ||
      has("Could not fetch URL") || has("Connection reset") || has("RemoteDisconnected")) {
    return "the connection failed";
  }
  return "";
}

}  // namespace

std::string IndexUnreachableNote(const std::string& pip_output, const config::Config& config) {
  // pip names the indexes it used when they are not PyPI alone (a --index-url of the run's own
  // included); else the config's, else PyPI.
  std::string index =
      config.pip_index_url.empty() ? "PyPI, https://pypi.org/simple" : config.pip_index_url;
  const std::string looking = "Looking in indexes: ";
  if (const size_t at = pip_output.find(looking); at != std::string::npos) {
    const size_t start = at + looking.size();
    index = pip_output.substr(start, pip_output.find('\n', start) - start);
  }
  std::string why = IndexFailure(pip_output);
  const bool untrusted =
      pip_output.find("is not a trusted or secure host and is being ignored") != std::string::npos;
  if (why.empty() && !untrusted) return "";
  if (why.empty()) {
    why = "pip ignored it: it is plain http and its host is not trusted";
  }
  return "sandrun: pip could not reach the package index (" + index + "): " + why +
         ", so \"from versions: none\" says nothing about whether the package exists. What the "
         "server's admin can do: check that this server reaches the index (runs connect from "
         "it), or set \"pip_index_url\" (and \"pip_extra_index_urls\") to an index the runs "
         "can reach, with \"pip_trusted_hosts\" for a plain http one and "
         "\"network_allow_cidrs\" for one at a private address; or prepare the packages: "
         "\"environments_prebuild\", or install them on the host "
         "(scripts/packages/batteries.txt).";
}

}  // namespace sandrun::run
