#include "config/runs_dir.h"

#include <functional>

#include "sys/syscalls.h"

namespace sandrun::config {

Result<RunsDirChoice> ChooseRunsDir(const Config& config) {
  RunsDirChoice choice{config.runs_dir, false, ""};
  const std::string why = sys::FirstUnsearchableDir(config.runs_dir);
  if (why.empty()) return choice;
  if (config.runs_dir_configured) {
    return MakeError(ErrorKind::kInvalidInput,
                     "key 'runs_dir': " + why +
                         ": make every directory on the path searchable by others "
                         "(chmod o+x) or choose another path");
  }
  choice.path = "/run/sandrun/" + std::to_string(std::hash<std::string>{}(config.state_dir));
  choice.fallback = true;
  choice.note = why + "; runs go to " + choice.path + " instead";
  return choice;
}

}  // namespace sandrun::config
