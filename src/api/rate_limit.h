// POST /run's rate limit per user (DESIGN.md additions, "One identity, one bucket"): a token
// bucket per identity the run would act as, so that one user has one limit however a request
// names them. nginx keeps the limit per bearer token in front of it; this one needs the
// token's binding, which only the daemon knows (tokens_file is live on SIGHUP). Thread-safe.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <unordered_map>

#include "api/access.h"

namespace sandrun::api {

// The identity a request's rate is counted against: a bound or plain token's own user, whatever
// `user_header` (X-Sandrun-User) says (the run is refused if the header names another); a
// front end's token: the user the header names ("" when none). Empty for an anonymous caller
// (no token: nothing ties its requests together, so it is not limited here).
std::string RateKey(const Caller& caller, const std::string& user_header);

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  // `per_second` requests a second, `burst` more at once (nginx's `rate=`, `burst= nodelay`).
  RateLimiter(double per_second, double burst) : rate_(per_second), capacity_(burst + 1) {}
  // Takes one request of `key` at `now`; false when its bucket is empty (answer 429). An empty
  // key is always allowed. At most kMaxKeys buckets are kept: full ones go first.
  bool Allow(const std::string& key, Clock::time_point now = Clock::now());

  static constexpr size_t kMaxKeys = 65536;

 private:
  struct Bucket {
    double tokens = 0;
    Clock::time_point at;
  };
  void Prune(Clock::time_point now);

  const double rate_, capacity_;
  std::mutex mutex_;
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace sandrun::api
