#include "util/relative_path.h"

namespace sandrun::util {

std::string RelativePathError(std::string_view path) {
  if (path.empty()) return "is empty";
  if (path.size() > kMaxRelativePathBytes) {
    return "is longer than " + std::to_string(kMaxRelativePathBytes) + " bytes";
  }
  if (path[0] == '/') return "must be relative to the workspace (no leading '/')";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view segment = path.substr(start, end - start);
    if (segment.empty()) return "has an empty segment ('//' or a trailing '/')";
    if (segment == "." || segment == "..") return "must not contain '.' or '..' segments";
    if (segment.size() > kMaxPathNameBytes) {
      return "has a name longer than " + std::to_string(kMaxPathNameBytes) + " bytes";
    }
    if (segment.find('\0') != std::string_view::npos) return "contains a NUL byte";
    start = end + 1;
  }
  return "";
}

bool SplitRelativePath(std::string_view path, std::vector<std::string>* out) {
  out->clear();
  if (!RelativePathError(path).empty()) return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    out->emplace_back(path.substr(start, end - start));
    start = end + 1;
  }
  return true;
}

}  // namespace sandrun::util
