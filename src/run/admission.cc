#include "run/admission.h"

namespace sandrun::run {

Admission::Ticket Admission::Acquire() {
  std::unique_lock lock(mu_);
  if (active_ < slots_) {
    ++active_;
    return Ticket(this);
  }
  if (waiting_ >= queue_) return Ticket(nullptr);
  ++waiting_;
  bool got = cv_.wait_for(lock, wait_, [&] { return active_ < slots_; });
  --waiting_;
  if (!got) return Ticket(nullptr);
  ++active_;
  return Ticket(this);
}

void Admission::Release() {
  {
    std::lock_guard lock(mu_);
    --active_;
  }
  cv_.notify_one();
}

int64_t Admission::active() const {
  std::lock_guard lock(mu_);
  return active_;
}

int64_t Admission::queued() const {
  std::lock_guard lock(mu_);
  return waiting_;
}

WaiterGate::Pass WaiterGate::Enter(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = by_key_.find(key);
  const int64_t here = it == by_key_.end() ? 0 : it->second;
  if (here >= per_key_ || waiting_ >= total_) return Pass(nullptr, "");
  ++by_key_[key];
  ++waiting_;
  return Pass(this, key);
}

void WaiterGate::Leave(const std::string& key) {
  std::lock_guard lock(mu_);
  --waiting_;
  if (--by_key_[key] <= 0) by_key_.erase(key);
}

int64_t WaiterGate::waiting() const {
  std::lock_guard lock(mu_);
  return waiting_;
}

}  // namespace sandrun::run
