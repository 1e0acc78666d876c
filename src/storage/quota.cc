#include "storage/quota.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <sstream>
#include <tuple>

namespace sandrun::storage {
namespace {

constexpr char kRecordMagic[] = "sandrun-run 1";

template <typename T>
bool ParseNumber(const std::string& text, T* out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end && !text.empty();
}

}  // namespace

bool Fits(const Usage& usage, const Quota& quota) {
  return (quota.max_files == 0 || usage.files <= quota.max_files) &&
         (quota.max_bytes == 0 || usage.bytes <= quota.max_bytes);
}

EvictionPlan PlanEviction(std::vector<RunInfo> runs, const Usage& incoming, const Quota& quota) {
  EvictionPlan plan;
  if (!Fits(incoming, quota)) {
    plan.fits = false;
    return plan;
  }
  std::sort(runs.begin(), runs.end(), [](const RunInfo& a, const RunInfo& b) {
    return std::tie(a.created_at, a.live_ns, a.run_id) <
           std::tie(b.created_at, b.live_ns, b.run_id);
  });
  Usage total = incoming;
  for (const RunInfo& run : runs) total += run.usage;
  for (const RunInfo& run : runs) {
    if (Fits(total, quota)) break;
    plan.evict.push_back(run.run_id);
    total.files -= run.usage.files;
    total.bytes -= run.usage.bytes;
  }
  return plan;
}

bool RunExpired(int64_t created_at, int64_t max_age_s, int64_t now) {
  if (max_age_s <= 0) return false;
  // created_at comes from a file on disk: keep the sum from overflowing.
  if (created_at > std::numeric_limits<int64_t>::max() - max_age_s) return false;
  // Strictly past: nginx's secure_link still accepts a link in its `expires` second itself,
  // and the file must be there for as long as any link to it is accepted.
  return created_at + max_age_s < now;
}

int64_t LinkExpiresAt(int64_t now, int64_t link_ttl_s, int64_t created_at, int64_t max_age_s) {
  const int64_t link_end = now + link_ttl_s;
  if (max_age_s <= 0) return link_end;
  return std::min(link_end, created_at + max_age_s);
}

std::string DescribeOverQuota(const Usage& requested, const Quota& quota) {
  auto mib = [](uint64_t bytes) {
    std::ostringstream out;
    out.setf(std::ios::fixed);
    const uint64_t unit = bytes >= (1u << 20) ? (1u << 20) : 1024;
    out.precision(bytes % unit == 0 ? 0 : 1);
    if (bytes < 1024) {
      out << bytes << " bytes";
    } else {
      out << static_cast<double>(bytes) / static_cast<double>(unit)
          << (unit == 1024 ? " KiB" : " MiB");
    }
    return out.str();
  };
  std::string limits;
  if (quota.max_files != 0) limits = std::to_string(quota.max_files) + " files";
  if (quota.max_bytes != 0) limits += (limits.empty() ? "" : " and ") + mib(quota.max_bytes);
  return "the run's " + std::to_string(requested.files) + " files (" + mib(requested.bytes) +
         ") are over the per-user quota of " + limits + "; none were published";
}

std::string EncodeRunRecord(const RunInfo& run) {
  std::ostringstream out;
  out << kRecordMagic << "\n"
      << "created_at " << run.created_at << "\n"
      << "live_ns " << run.live_ns << "\n"
      << "files " << run.usage.files << "\n"
      << "bytes " << run.usage.bytes << "\n";
  return out.str();
}

std::optional<RunInfo> ParseRunRecord(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != kRecordMagic) return std::nullopt;
  RunInfo run;
  bool have_created = false, have_live = false, have_files = false, have_bytes = false;
  while (std::getline(in, line)) {
    const size_t space = line.find(' ');
    if (space == std::string::npos) return std::nullopt;
    const std::string key = line.substr(0, space);
    const std::string value = line.substr(space + 1);
    bool ok = false;
    if (key == "created_at") {
      ok = ParseNumber(value, &run.created_at) && !have_created;
      have_created = true;
    } else if (key == "live_ns") {
      ok = ParseNumber(value, &run.live_ns) && !have_live;
      have_live = true;
    } else if (key == "files") {
      ok = ParseNumber(value, &run.usage.files) && !have_files;
      have_files = true;
    } else if (key == "bytes") {
      ok = ParseNumber(value, &run.usage.bytes) && !have_bytes;
      have_bytes = true;
    } else {
      ok = true;  // a key of a later version: ignored
    }
    if (!ok) return std::nullopt;
  }
  if (!have_created || !have_live || !have_files || !have_bytes) return std::nullopt;
  return run;
}

}  // namespace sandrun::storage
