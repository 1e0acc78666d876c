#include "run/warm_pool.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <vector>

namespace sandrun::run {

bool RefillMayStart(const RefillGate& gate, RefillLoad load, std::chrono::milliseconds waited) {
  if (!gate.load || load.in_flight <= 0) return true;
  return std::min(load.on_cpu, load.in_flight) < gate.cpus && waited >= gate.patience;
}

WarmPool::WarmPool(std::map<std::string, int64_t> sizes, Factory factory, RefillGate gate)
    : factory_(std::move(factory)), gate_(std::move(gate)) {
  for (const auto& [language, size] : sizes) {
    if (size > 0) languages_[language].stats.size = size;
  }
}

WarmPool::~WarmPool() { Stop(); }

void WarmPool::Start() {
  std::lock_guard lock(mu_);
  if (languages_.empty() || thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { Refill(); });
}

void WarmPool::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::vector<std::unique_ptr<WarmSandbox>> gone;
  {
    std::lock_guard lock(mu_);
    for (auto& [name, language] : languages_) {
      for (auto& sandbox : language.ready) gone.push_back(std::move(sandbox));
      language.ready.clear();
      language.stats.ready = 0;
    }
  }
  // Destroyed outside the lock: each kills and reaps its sandbox, unmounts and removes.
}

bool WarmPool::Serves(const std::string& language) const {
  std::lock_guard lock(mu_);
  return languages_.count(language) > 0;
}

std::unique_ptr<WarmSandbox> WarmPool::Take(const std::string& language, int64_t disk_mb) {
  std::unique_ptr<WarmSandbox> taken;
  std::vector<std::unique_ptr<WarmSandbox>> dead;
  {
    std::lock_guard lock(mu_);
    auto it = languages_.find(language);
    if (it == languages_.end() || stopping_) return nullptr;
    Language& l = it->second;
    while (!l.ready.empty() && taken == nullptr) {
      std::unique_ptr<WarmSandbox> next = std::move(l.ready.front());
      l.ready.pop_front();
      if (next->sandbox->Exited()) {
        ++l.stats.failures;
        l.stats.last_error = next->sandbox->ExitDescription();
        dead.push_back(std::move(next));
      } else if (next->disk_mb != disk_mb) {
        dead.push_back(std::move(next));  // made before a SIGHUP changed the default
      } else {
        taken = std::move(next);
      }
    }
    l.stats.ready = static_cast<int64_t>(l.ready.size());
    if (taken) {
      ++l.stats.hits;
    } else {
      ++l.stats.misses;
    }
  }
  wake_.notify_all();
  return taken;
}

std::map<std::string, WarmPoolStats> WarmPool::Stats() const {
  std::lock_guard lock(mu_);
  std::map<std::string, WarmPoolStats> out;
  for (const auto& [name, language] : languages_) out[name] = language.stats;
  return out;
}

std::string WarmPool::Neediest() const {
  std::string name;
  double fill = 1.0;
  for (const auto& [n, l] : languages_) {
    const double f = static_cast<double>(l.ready.size()) / static_cast<double>(l.stats.size);
    if (f < fill) {
      fill = f;
      name = n;
    }
  }
  return name;
}

// Fills the emptiest language first, one sandbox at a time; after a failure waits a second
// (a host that cannot start sandboxes must not be hammered). Every few seconds it drops the
// sandboxes that ended while waiting, so a dead one is replaced before a run finds it.
void WarmPool::Refill() {
  using namespace std::chrono_literals;
  std::unique_lock lock(mu_);
  auto next_check = std::chrono::steady_clock::now() + 5s;
  while (!stopping_) {
    if (std::chrono::steady_clock::now() >= next_check) {
      next_check = std::chrono::steady_clock::now() + 5s;
      std::vector<std::unique_ptr<WarmSandbox>> dead;
      for (auto& [n, l] : languages_) {
        for (auto it = l.ready.begin(); it != l.ready.end();) {
          if ((*it)->sandbox->Exited()) {
            ++l.stats.failures;
            l.stats.last_error = (*it)->sandbox->ExitDescription();
            dead.push_back(std::move(*it));
            it = l.ready.erase(it);
          } else {
            ++it;
          }
        }
        l.stats.ready = static_cast<int64_t>(l.ready.size());
      }
      lock.unlock();
      dead.clear();
      lock.lock();
      continue;
    }
    const std::string name = Neediest();
    if (name.empty()) {
      wake_.wait_until(lock, next_check);
      continue;
    }
    if (gate_.load) {
      const auto now = std::chrono::steady_clock::now();
      if (!due_since_) due_since_ = now;
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - *due_since_);
      if (!RefillMayStart(gate_, gate_.load(), waited)) {
        languages_[name].stats.deferred = true;
        wake_.wait_for(lock, kDeferredPoll);
        continue;
      }
    }
    due_since_.reset();
    languages_[name].stats.deferred = false;
    languages_[name].stats.refilling = true;
    lock.unlock();
    auto made = factory_(name);
    lock.lock();
    Language& l = languages_[name];
    l.stats.refilling = false;
    if (made.ok() && !stopping_) {
      l.ready.push_back(std::move(*made));
      l.stats.ready = static_cast<int64_t>(l.ready.size());
    } else if (!made.ok()) {
      ++l.stats.failures;
      l.stats.last_error = made.error().message;
      wake_.wait_for(lock, 1s, [this] { return stopping_; });
    } else {
      lock.unlock();
      made->reset();
      lock.lock();
    }
  }
}

}  // namespace sandrun::run
