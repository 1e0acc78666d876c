#include "storage/environment_store.h"

#include <fcntl.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "storage/digest.h"
#include "sys/tree_walk.h"

namespace sandrun::storage {
namespace fs = std::filesystem;
namespace {

constexpr char kMetaMagic[] = "sandrun-environment 1";

int64_t Now() { return static_cast<int64_t>(std::time(nullptr)); }

// The apparent size of the regular files below `dir` (symlinks not followed). An environment
// is pip's output, not the user's, so its bounds are generous; past them the size shown is a
// lower bound.
uint64_t TreeBytes(const std::string& dir) {
  return sys::MeasureTreeAt(AT_FDCWD, dir, sys::TreeLimits{256, 10000000, UINT64_MAX}).bytes;
}

std::string EncodeMeta(const EnvironmentMeta& meta) {
  std::string out = std::string(kMetaMagic) + "\n";
  out += "build_ms " + std::to_string(meta.build_ms) + "\n";
  out += "bytes " + std::to_string(meta.bytes) + "\n";
  for (const auto& p : meta.packages) out += "package " + p + "\n";
  return out;
}

bool ReadMeta(const std::string& dir, const std::string& id, EnvironmentMeta* meta) {
  std::ifstream in(dir + "/meta");
  std::string line;
  if (!std::getline(in, line) || line != kMetaMagic) return false;
  *meta = EnvironmentMeta{};
  meta->id = id;
  while (std::getline(in, line)) {
    const size_t space = line.find(' ');
    if (space == std::string::npos) return false;
    const std::string key = line.substr(0, space), value = line.substr(space + 1);
    if (key == "build_ms") {
      meta->build_ms = std::strtoll(value.c_str(), nullptr, 10);
    } else if (key == "bytes") {
      meta->bytes = std::strtoull(value.c_str(), nullptr, 10);
    } else if (key == "package") {
      meta->packages.push_back(value);
    }
  }
  return true;
}

bool IsId(const std::string& name) {
  return name.size() == 32 && name.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

EnvironmentStore::Lease& EnvironmentStore::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = other.owner_;
    id_ = std::move(other.id_);
    other.owner_ = nullptr;
  }
  return *this;
}

void EnvironmentStore::Lease::Release() {
  if (owner_ == nullptr) return;
  std::lock_guard<std::mutex> lock(owner_->mu_);
  auto it = owner_->leases_.find(id_);
  if (it != owner_->leases_.end() && --it->second <= 0) owner_->leases_.erase(it);
  owner_ = nullptr;
}

EnvironmentStore::EnvironmentStore(Options options, Builder builder)
    : options_(std::move(options)), builder_(std::move(builder)) {
  std::error_code ec;
  fs::create_directories(options_.root, ec);
  for (fs::directory_iterator it(options_.root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(".build-", 0) == 0 || name.rfind(".trash-", 0) == 0) {
      std::error_code remove_ec;
      fs::remove_all(it->path(), remove_ec);
    }
  }
}

EnvironmentStore::~EnvironmentStore() {
  // Each build detaches its own thread when done (Build), under mu_.
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return building_.empty(); });
}

std::string EnvironmentStore::IdOf(const std::vector<std::string>& packages) const {
  std::string text = options_.python + "\n";
  for (const auto& p : packages) text += p + "\n";
  Sha256 sha;
  sha.Update(text.data(), text.size());
  return sha.FinalHex().substr(0, 32);
}

bool EnvironmentStore::TakePresent(const std::string& id, Answer* answer) {
  const std::string dir = DirOf(id);
  if (!ReadMeta(dir, id, &answer->meta)) return false;
  std::error_code ec;
  fs::last_write_time(dir + "/meta", fs::file_time_type::clock::now(), ec);  // last use
  answer->site_dir = dir + "/" + kEnvironmentSite;
  ++leases_[id];
  answer->lease = Lease(this, id);
  return true;
}

void EnvironmentStore::StartBuild(const std::string& id, const std::vector<std::string>& packages) {
  building_[id] = Now();
  failed_.erase(id);
  ++builds_started_;
  // Finished threads are joined here, so the list stays as long as the builds in progress.
  threads_.erase(std::remove_if(threads_.begin(), threads_.end(),
                                [](std::thread& t) { return !t.joinable(); }),
                 threads_.end());
  threads_.emplace_back(&EnvironmentStore::Build, this, id, packages);
}

void EnvironmentStore::Build(std::string id, std::vector<std::string> packages) {
  const auto started = std::chrono::steady_clock::now();
  const std::string tmp = options_.root + "/.build-" + id;
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  BuildResult result;
  if (ec) {
    result.output = "sandrun: cannot create " + tmp + ": " + ec.message();
  } else {
    result = builder_(tmp, packages);
  }
  EnvironmentMeta meta;
  meta.id = id;
  meta.packages = packages;
  meta.build_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - started)
                      .count();
  if (result.ok) {
    meta.bytes = TreeBytes(tmp);
    std::ofstream out(tmp + "/meta");
    out << EncodeMeta(meta);
    out.close();
    // Published whole by one rename: a run sees the environment complete or not at all.
    if (!out || (fs::rename(tmp, DirOf(id), ec), ec)) {
      result.ok = false;
      result.output += "\nsandrun: the environment could not be stored: " +
                       (ec ? ec.message() : std::string("meta not written"));
    }
  }
  if (!result.ok) fs::remove_all(tmp, ec);
  std::lock_guard<std::mutex> lock(mu_);
  building_.erase(id);
  if (!result.ok) failed_[id] = Failure{Now(), std::move(result.output)};
  // Done with the store but for unlocking mu_: detached, so StartBuild and the destructor
  // need not join it.
  for (auto& t : threads_) {
    if (t.get_id() == std::this_thread::get_id()) t.detach();
  }
  cv_.notify_all();
}

EnvironmentStore::Answer EnvironmentStore::Acquire(const std::vector<std::string>& packages,
                                                   bool may_build, std::chrono::milliseconds wait) {
  Answer answer;
  const std::string id = IdOf(packages);
  answer.meta.id = id;
  answer.meta.packages = packages;
  const auto deadline = std::chrono::steady_clock::now() + wait;
  std::unique_lock<std::mutex> lock(mu_);
  bool waited = false;
  while (true) {
    if (TakePresent(id, &answer)) {
      answer.outcome = waited ? Outcome::kBuilt : Outcome::kCached;
      return answer;
    }
    if (auto f = failed_.find(id); f != failed_.end()) {
      const int64_t age = Now() - f->second.at_s;
      if (age < options_.failure_ttl_s) {
        answer.outcome = Outcome::kFailed;
        answer.failure_output = f->second.output;
        answer.retry_after_s = options_.failure_ttl_s - age;
        return answer;
      }
      failed_.erase(f);
    }
    if (building_.count(id) == 0) {
      if (!may_build) {
        answer.outcome = Outcome::kAbsent;
        return answer;
      }
      if (static_cast<int64_t>(building_.size()) >= options_.max_builds) {
        answer.outcome = Outcome::kBusy;
        answer.retry_after_s = 30;
        return answer;
      }
      StartBuild(id, packages);
    }
    waited = true;
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && building_.count(id) > 0) {
      answer.outcome = Outcome::kBuilding;
      answer.retry_after_s = 10;
      return answer;
    }
  }
}

void EnvironmentStore::Prebuild(const std::vector<std::string>& packages) {
  const std::string id = IdOf(packages);
  std::lock_guard<std::mutex> lock(mu_);
  EnvironmentMeta meta;
  if (ReadMeta(DirOf(id), id, &meta) || building_.count(id) > 0 || failed_.count(id) > 0) return;
  StartBuild(id, packages);
}

std::vector<EnvironmentMeta> EnvironmentStore::ListPresent() const {
  std::vector<EnvironmentMeta> out;
  std::error_code ec;
  for (fs::directory_iterator it(options_.root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    EnvironmentMeta meta;
    if (IsId(name) && ReadMeta(it->path().string(), name, &meta)) out.push_back(std::move(meta));
  }
  return out;
}

EnvironmentStore::Answer EnvironmentStore::FindServing(
    const std::vector<std::string>& packages, const std::vector<std::string>& trusted,
    const std::function<bool(const std::string& want, const std::vector<std::string>& have)>&
        covered) {
  Answer answer;
  std::lock_guard<std::mutex> lock(mu_);
  if (TakePresent(IdOf(packages), &answer)) {
    answer.outcome = Outcome::kCached;
    return answer;
  }
  std::optional<EnvironmentMeta> best;
  for (const auto& id : trusted) {
    EnvironmentMeta meta;
    if (!IsId(id) || !ReadMeta(DirOf(id), id, &meta)) continue;
    const bool covers = std::all_of(packages.begin(), packages.end(), [&](const std::string& p) {
      return covered(p, meta.packages);
    });
    if (covers && (!best || meta.packages.size() < best->packages.size())) best = std::move(meta);
  }
  if (best && TakePresent(best->id, &answer)) answer.outcome = Outcome::kCached;
  return answer;
}

std::vector<std::string> EnvironmentStore::Evict(uint64_t max_bytes) {
  struct Entry {
    EnvironmentMeta meta;
    fs::file_time_type used;
  };
  std::vector<Entry> entries;
  for (auto& meta : ListPresent()) {
    std::error_code ec;
    const auto used = fs::last_write_time(DirOf(meta.id) + "/meta", ec);
    if (!ec) entries.push_back({std::move(meta), used});
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.used < b.used; });
  uint64_t total = 0;
  for (const auto& e : entries) total += e.meta.bytes;
  std::vector<std::string> removed, trash;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& e : entries) {
      if (total <= max_bytes) break;
      if (leases_.count(e.meta.id) > 0) continue;  // a run has it mounted
      const std::string to =
          options_.root + "/.trash-" + e.meta.id + "-" + std::to_string(++trash_serial_);
      std::error_code ec;
      fs::rename(DirOf(e.meta.id), to, ec);
      if (ec) continue;
      total -= e.meta.bytes;
      removed.push_back(e.meta.id);
      trash.push_back(to);
    }
  }
  for (const auto& dir : trash) {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  return removed;
}

int64_t EnvironmentStore::builds_started() const {
  std::lock_guard<std::mutex> lock(mu_);
  return builds_started_;
}

}  // namespace sandrun::storage
