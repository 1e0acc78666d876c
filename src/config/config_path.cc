#include "config/config_path.h"

#include "config/config.h"

namespace sandrun::config {

std::vector<std::string> ServeConfigCandidates(const std::string& exe) {
  std::vector<std::string> candidates = {".state/sandrun.jsonc"};
  const std::string suffix = "/build/src/sandrund";
  if (exe.size() > suffix.size() &&
      exe.compare(exe.size() - suffix.size(), suffix.size(), suffix) == 0) {
    candidates.push_back(exe.substr(0, exe.size() - suffix.size()) + "/.state/sandrun.jsonc");
  }
  return candidates;
}

ConfigPathChoice ChooseConfigPath(const std::function<bool(const std::string&)>& exists,
                                  const std::vector<std::string>& serve_configs,
                                  const std::string& command) {
  const std::string installed = kDefaultConfigPath;
  if (exists(installed)) return {installed, "the default; --config FILE names another", ""};
  for (const std::string& serve : serve_configs) {
    if (exists(serve)) {
      return {serve, "scripts/serve's: " + installed + " is missing; --config FILE names another",
              ""};
    }
  }
  const std::string here = serve_configs.empty() ? ".state/sandrun.jsonc" : serve_configs.front();
  return {"", "",
          "no config: " + installed + " is missing (scripts/install and the Debian package " +
              "write it), and there is no scripts/serve config " + here +
              "\n  fix: after scripts/serve, from the repository: build/src/sandrund " + command +
              " --config .state/sandrun.jsonc (scripts/serve writes it in its state directory, "
              "SANDRUN_SCRIPT_STATE_DIR, .state/ by default); after an install: sandrund " +
              command + "; or name a config: sandrund " + command + " --config FILE"};
}

}  // namespace sandrun::config
