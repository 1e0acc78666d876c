#include "storage/dist_records.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string_view>
#include <vector>

#include "storage/digest.h"
#include "storage/fs.h"
#include "util/text.h"

namespace sandrun::storage {
namespace {

constexpr size_t kMaxEntries = 100000;        // names in the site directory
constexpr size_t kMaxRecordBytes = 64 << 20;  // one RECORD (a large package's is ~1 MB)
constexpr size_t kMetadataHead = 64 << 10;    // METADATA's headers come first
constexpr char kDistInfo[] = ".dist-info";

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Up to `max` bytes of the regular file `name` in `dirfd`, opened without following a
// symlink or blocking on a FIFO; *whole says whether that was all of it.
Result<std::string> ReadFileAt(int dirfd, const std::string& name, size_t max, bool* whole) {
  UniqueFd fd(openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return StorageError("openat", name, LastErrno());
  struct stat st;
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return MakeError(ErrorKind::kSystem, name + " is not a regular file");
  }
  std::string out;
  char buf[65536];
  while (out.size() < max) {
    const ssize_t n = read(fd.get(), buf, std::min(sizeof buf, max - out.size()));
    if (n < 0) return StorageError("read", name, LastErrno());
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  *whole = out.size() < max || read(fd.get(), buf, 1) == 0;
  return out;
}

// The path and hash fields of one RECORD line (CSV: a field may be quoted, "" inside it
// being one quote). False for a line without them.
bool ParseRecordLine(std::string_view line, std::string* path, std::string* hash) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back().push_back('"');
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back().push_back(c);
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c != '\r') {
      fields.back().push_back(c);
    }
  }
  if (fields.size() < 2 || fields[0].empty()) return false;
  *path = fields[0];
  *hash = fields[1];
  return true;
}

// `path` with "." segments and each ".." after a name resolved; leading ".." kept: pip
// --target records a console script as ../../bin/NAME (it moves bin/ into the directory
// too), and two distributions with the same script name are one overwrite as well.
std::string NormalPath(std::string_view path) {
  std::vector<std::string_view> parts;
  const bool absolute = !path.empty() && path.front() == '/';
  while (!path.empty()) {
    const size_t slash = path.find('/');
    const std::string_view part = path.substr(0, slash);
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
    if (part.empty() || part == ".") continue;
    if (part == ".." && !parts.empty() && parts.back() != "..") {
      parts.pop_back();
    } else {
      parts.push_back(part);
    }
  }
  std::string out = absolute ? "/" : "";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? "/" : "") + std::string(parts[i]);
  return out;
}

// "name version" from METADATA's headers, else the directory's name without .dist-info.
std::string DistLabel(int site_fd, const std::string& dist_info) {
  std::string label = dist_info.substr(0, dist_info.size() - std::strlen(kDistInfo));
  UniqueFd dir = OpenDirAt(site_fd, dist_info);
  if (!dir.valid()) return util::SanitizeUtf8(label);
  bool whole = false;
  auto text = ReadFileAt(dir.get(), "METADATA", kMetadataHead, &whole);
  if (!text.ok()) return util::SanitizeUtf8(label);
  std::string name, version;
  size_t at = 0;
  while (at < text->size()) {
    const size_t end = std::min(text->find('\n', at), text->size());
    const std::string_view line(text->data() + at, end - at);
    if (line.empty() || line == "\r") break;  // the headers end at the first blank line
    if (line.substr(0, 6) == "Name: ") name = std::string(line.substr(6));
    if (line.substr(0, 9) == "Version: ") version = std::string(line.substr(9));
    at = end + 1;
  }
  if (!name.empty()) label = name + (version.empty() ? "" : " " + version);
  label.erase(std::remove(label.begin(), label.end(), '\r'), label.end());
  return util::SanitizeUtf8(label.substr(0, 200));
}

// sha256=<urlsafe base64, no padding> of site/<path> (as RECORD writes it); "" when it is not
// a regular file reached without a symlink.
std::string RecordHashOf(int site_fd, const std::string& path) {
  std::vector<std::string> parts;
  if (!SplitRelativePath(path, &parts)) return "";
  UniqueFd dir;
  int parent = site_fd;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    UniqueFd next = OpenDirAt(parent, parts[i]);
    if (!next.valid()) return "";
    dir = std::move(next);
    parent = dir.get();
  }
  UniqueFd fd(openat(parent, parts.back().c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st;
  if (!fd.valid() || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  auto hex = Sha256OfFd(fd.get());
  if (!hex.ok() || hex->size() != 64) return "";
  unsigned char bytes[32];
  for (size_t i = 0; i < 32; ++i) {
    bytes[i] = static_cast<unsigned char>(std::stoi(hex->substr(2 * i, 2), nullptr, 16));
  }
  unsigned char b64[48];
  const int n = EVP_EncodeBlock(b64, bytes, 32);
  std::string out(reinterpret_cast<const char*>(b64), static_cast<size_t>(n));
  std::replace(out.begin(), out.end(), '+', '-');
  std::replace(out.begin(), out.end(), '/', '_');
  out.erase(std::remove(out.begin(), out.end(), '='), out.end());
  return "sha256=" + out;
}

// The source of a compiled file: pkg/__pycache__/mod.cpython-311.pyc -> pkg/mod.py; "" when
// `path` is not one.
std::string SourceOfCompiled(const std::string& path) {
  if (!EndsWith(path, ".pyc")) return "";
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash);
  const std::string file = path.substr(slash == std::string::npos ? 0 : slash + 1);
  const std::string stem = file.substr(0, file.find('.'));
  if (dir == "__pycache__" || EndsWith(dir, "/__pycache__")) {
    const std::string parent = dir.substr(0, dir.size() - std::strlen("__pycache__"));
    return parent + stem + ".py";
  }
  return path.substr(0, path.size() - 1);
}

struct Claim {
  std::string dist;
  std::string hash;
};

struct Contest {
  std::string path;
  Claim first, second;
};

// The files two distributions list, from every RECORD of the site directory; "" or why
// they cannot be known.
std::string ReadContests(int site_fd, const std::map<std::string, std::string>& labels,
                         std::vector<Contest>* contests) {
  std::map<std::string, Claim> owners;  // path -> the first distribution that lists it
  for (const auto& [dist_info, label] : labels) {
    const std::string unreadable = label +
                                   " has no RECORD that can be read: its files cannot "
                                   "be checked";
    UniqueFd dir = OpenDirAt(site_fd, dist_info);
    if (!dir.valid()) return unreadable;
    bool whole = false;
    auto record = ReadFileAt(dir.get(), "RECORD", kMaxRecordBytes, &whole);
    if (!record.ok() || !whole) return unreadable;
    for (size_t at = 0; at < record->size();) {
      const size_t end = std::min(record->find('\n', at), record->size());
      std::string raw, hash;
      const bool row = ParseRecordLine(std::string_view(*record).substr(at, end - at), &raw, &hash);
      at = end + 1;
      if (!row) continue;
      const std::string path = NormalPath(raw);
      if (path.empty()) continue;
      const std::string top = path.substr(0, path.find('/'));
      if (EndsWith(top, kDistInfo) && top != dist_info) {
        // Another distribution's metadata: never shared.
        const auto other = labels.find(top);
        contests->push_back(
            {path, Claim{other == labels.end() ? top : other->second, "-"}, Claim{label, "+"}});
        continue;
      }
      auto [it, inserted] = owners.emplace(path, Claim{label, hash});
      if (!inserted && it->second.dist != label) {
        contests->push_back({path, it->second, Claim{label, hash}});
      }
    }
  }
  return "";
}

}  // namespace

std::string FindOverwrites(const std::string& site_dir) {
  UniqueFd site(open(site_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!site.valid()) return "the installed files cannot be checked: the directory is missing";
  bool truncated = false;
  auto names = ListDir(site.get(), kMaxEntries, &truncated);
  if (!names.ok() || truncated) return "the installed files cannot be checked: too many entries";
  std::map<std::string, std::string> labels;  // dist-info directory -> "name version"
  for (const auto& name : *names) {
    if (EndsWith(name, kDistInfo)) labels[name] = DistLabel(site.get(), name);
  }
  std::vector<Contest> contests;
  if (std::string why = ReadContests(site.get(), labels, &contests); !why.empty()) return why;
  // Shared with the same content, as the file on disk shows: a namespace package's
  // __init__.py. Compiled files follow their source.
  std::set<std::string> contested, differ;
  for (const auto& c : contests) {
    if (!SourceOfCompiled(c.path).empty()) continue;
    contested.insert(c.path);
    const bool identical = c.first.hash == c.second.hash && c.first.hash.rfind("sha256=", 0) == 0 &&
                           RecordHashOf(site.get(), c.path) == c.first.hash;
    if (!identical) differ.insert(c.path);
  }
  std::vector<const Contest*> overwrites;
  for (const auto& c : contests) {
    const std::string source = SourceOfCompiled(c.path);
    const std::string& judged = source.empty() ? c.path : source;
    if (contested.count(judged) == 0 || differ.count(judged) > 0) overwrites.push_back(&c);
  }
  if (overwrites.empty()) return "";
  const Contest& c = *overwrites.front();
  std::string message = c.second.dist + " and " + c.first.dist + " both install " +
                        util::SanitizeUtf8(c.path.substr(0, 300)) + " (one overwrote the other's)";
  if (overwrites.size() > 1) {
    const size_t more = overwrites.size() - 1;
    message += ", and " + std::to_string(more) + (more == 1 ? " more file" : " more files");
  }
  return message;
}

}  // namespace sandrun::storage
