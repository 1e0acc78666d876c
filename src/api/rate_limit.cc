#include "api/rate_limit.h"

#include <algorithm>

namespace sandrun::api {

std::string RateKey(const Caller& caller, const std::string& user_header) {
  if (caller.token == nullptr) return "";
  if (caller.token->kind == config::Token::Kind::kFrontEnd) return "user:" + user_header;
  return "user:" + caller.token->user;
}

void RateLimiter::Prune(Clock::time_point now) {
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    const double seconds = std::chrono::duration<double>(now - it->second.at).count();
    if (it->second.tokens + seconds * rate_ >= capacity_) {
      it = buckets_.erase(it);
    } else {
      ++it;
    }
  }
  // Still full of busy keys (a flood of distinct ones): forget them all rather than grow.
  if (buckets_.size() >= kMaxKeys) buckets_.clear();
}

bool RateLimiter::Allow(const std::string& key, Clock::time_point now) {
  if (key.empty()) return true;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    if (buckets_.size() >= kMaxKeys) Prune(now);
    it = buckets_.emplace(key, Bucket{capacity_, now}).first;
  }
  Bucket& b = it->second;
  const double seconds = std::chrono::duration<double>(now - b.at).count();
  b.tokens = std::min(capacity_, b.tokens + std::max(0.0, seconds) * rate_);
  b.at = now;
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

}  // namespace sandrun::api
