// Which config `sandrund check` and `sandrund print-config` read when no --config names one:
// the installed /etc/sandrun/sandrun.jsonc, or else the config scripts/serve writes (in its
// state directory, .state/ of the repository by default), saying which.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace sandrun::config {

struct ConfigPathChoice {
  std::string path;  // the config to read; "" when there is none to read
  std::string note;  // why this one, for the first line of the output
  std::string help;  // when `path` is "": what to run instead, one line each
};

// scripts/serve's configs to look for, in order: .state/sandrun.jsonc of the working directory
// (the repository, where the README runs build/src/sandrund from) and of the repository the
// binary `exe` was built in (<repo>/build/src/sandrund), when that differs.
std::vector<std::string> ServeConfigCandidates(const std::string& exe);

// kDefaultConfigPath when `exists` says it is there; else the first of `serve_configs` there;
// else none, with help naming both and the command (`sandrund <command> --config ...`) for each.
ConfigPathChoice ChooseConfigPath(const std::function<bool(const std::string&)>& exists,
                                  const std::vector<std::string>& serve_configs,
                                  const std::string& command);

}  // namespace sandrun::config
