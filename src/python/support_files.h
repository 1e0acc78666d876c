// The Python files of notebook display, embedded in the daemon at build time:
// sitecustomize.py (display(), figures and images shown by the program, the display manifest)
// and sandrun_main.py (runs a program as __main__ and shows its trailing expression).
#pragma once

#include <string_view>
#include <vector>

namespace sandrun::python {

// Where the files are inside the sandbox: written into the run's read-only .sandrun/python/
// and put first on PYTHONPATH, so every Python process of the run imports sitecustomize.
inline constexpr char kSupportDir[] = "/home/user/.sandrun/python";
inline constexpr char kSupportDirInWorkspace[] = ".sandrun/python";
// A language's argv entry "{loader}" becomes this path (config.h, Language::argv).
inline constexpr char kLoaderPath[] = "/home/user/.sandrun/python/sandrun_main.py";

struct SupportFile {
  const char* name;  // plain file name, e.g. "sitecustomize.py"
  std::string_view content;
};

// Every support file. Safe anywhere (static data, built on first call).
const std::vector<SupportFile>& SupportFiles();

// The text of the Python the daemon itself runs in a sandbox, not written into runs
// (build_caches.py: the caches built at start-up, api/prepared_caches.cc; kernel_setup.py: run
// by each kernel before its first cell, kernel/kernel.cc); empty for another name. Safe
// anywhere.
std::string_view DaemonScript(std::string_view name);

}  // namespace sandrun::python
