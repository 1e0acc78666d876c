#include "sandbox/net_namespace_pool.h"

#include <poll.h>

#include <chrono>
#include <sstream>

#include "sys/netns.h"
#include "sys/signal_free_thread.h"

namespace sandrun::sandbox {
namespace {

// After a failure (no CAP_SYS_ADMIN, a namespace limit reached: user.max_net_namespaces), the
// thread waits this long before it tries again; runs meanwhile make their own.
constexpr auto kRetryAfterFailure = std::chrono::seconds(5);

// How long the check waits for a given-back run's last process (init's exit takes its pid
// namespace's processes with it); past it, the namespace goes.
constexpr int kRunEndWaitMs = 1000;
// How long a check waits for sockets freed after an RCU grace period (Clean).
constexpr auto kSocketFreeWait = std::chrono::milliseconds(50);

// The files of /proc/net compared with a fresh namespace's (both after RestartLoopbackIn):
// every counter of IP, ICMP, TCP, UDP (v4 and v6, and TCP's extended ones), the loopback
// device's traffic, flow labels (which outlive their sockets by a linger time), multicast
// memberships and filters, and IPv6's routes and route statistics (rt6_stats counts the
// per-CPU routes ever made, so a run that looked up ::1 leaves a trace no restart clears;
// Comparable).
const std::vector<std::string> kCompared = {"snmp",          "snmp6",     "netstat",   "dev",
                                            "ip6_flowlabel", "igmp",      "igmp6",     "mcfilter",
                                            "mcfilter6",     "rt6_stats", "ipv6_route"};
// `texts` of kCompared as compared: rt6_stats without its last count (routes discarded, one
// more at each restart of the loopback).
std::vector<std::string> Comparable(std::vector<std::string> texts) {
  for (size_t i = 0; i < kCompared.size() && i < texts.size(); ++i) {
    if (kCompared[i] != "rt6_stats") continue;
    std::string& t = texts[i];
    const size_t last = t.find_last_of(' ');
    if (last != std::string::npos) t.erase(last);
  }
  return texts;
}

// The files that count the namespace's sockets: sockstat and sockstat6 (every socket, TIME_WAIT
// ones, fragments waiting for reassembly) and protocols (each protocol's sockets: UNIX and
// NETLINK ones too, whatever sockstat's total says of a socket the unix garbage collector has
// yet to free).
const std::vector<std::string> kCounted = {"sockstat", "sockstat6", "protocols"};

// Whether `text` (one of kCounted) counts nothing in its namespace. sockstat's lines are
// "TCP: inuse 0 orphan 0 tw 0 alloc 1 mem 11": every count 0 but orphan, alloc and mem
// (proc(5): the whole host's totals, whatever the namespace). protocols' are a header, then
// "UNIX 1088 0 -1 ...": the third column (sockets in this namespace) 0, or -1 (not counted).
bool CountsNothing(const std::string& text) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string label, key, value;
    fields >> label;
    if (label == "protocol") {  // protocols' header
      while (std::getline(lines, line)) {
        std::istringstream row(line);
        std::string name, size, sockets;
        row >> name >> size >> sockets;
        if (sockets != "0" && sockets != "-1") return false;
      }
      return true;
    }
    while (fields >> key >> value) {
      if (key == "orphan" || key == "alloc" || key == "mem") continue;
      if (value != "0") return false;
    }
  }
  return true;
}

}  // namespace

NetNamespacePool::NetNamespacePool(size_t size) : size_(size) {
  if (size_ == 0) return;
  auto home = sys::OpenThreadNetNamespace();
  if (home.ok()) {
    home_ = std::move(*home);
  } else {
    stats_.last_error = home.error().message;
  }
}

NetNamespacePool::~NetNamespacePool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

sys::UniqueFd NetNamespacePool::Take(const std::string& owner) {
  if (size_ == 0 || !home_.valid()) return {};
  std::lock_guard<std::mutex> lock(mu_);
  if (!started_) {
    started_ = true;
    // The first Take may come from the start-up self-test, before the daemon blocks its stop
    // signals: the thread must not take them.
    thread_ = sys::StartSignalFreeThread([this] { Refill(); });
  }
  wake_.notify_one();
  if (!owner.empty()) {
    for (auto it = kept_.rbegin(); it != kept_.rend(); ++it) {
      if (it->owner != owner) continue;
      sys::UniqueFd fd = std::move(it->netns);
      kept_.erase(std::next(it).base());
      ++stats_.reused;
      return fd;
    }
  }
  if (ready_.empty()) {
    ++stats_.misses;
    return {};
  }
  sys::UniqueFd fd = std::move(ready_.front());
  ready_.pop_front();
  ++stats_.hits;
  return fd;
}

void NetNamespacePool::Return(sys::UniqueFd netns, const std::string& owner,
                              sys::UniqueFd run_end) {
  if (!netns.valid() || !run_end.valid() || owner.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!started_ || stopping_ || returned_.size() >= 2 * size_) return;
  returned_.push_back({owner, std::move(netns), std::move(run_end)});
  ++checking_;
  wake_.notify_one();
}

bool NetNamespacePool::NoSocketsIn(int netns) const {
  auto counted = sys::ReadNetFilesIn(netns, home_.get(), kCounted);
  if (!counted.ok()) return false;
  for (const std::string& text : *counted) {
    if (!CountsNothing(text)) return false;
  }
  return true;
}

bool NetNamespacePool::Clean(const Returned& r) {
  pollfd p{r.run_end.get(), POLLIN, 0};
  if (::poll(&p, 1, kRunEndWaitMs) != 1) return false;
  if (fresh_.empty()) return false;
  // The loopback restarted first: the routes the run's lookups cached (each with the time it
  // was made) go, and so do the multicast reports a run that joined groups and ended at once
  // left on timers, which would otherwise go out after this check.
  if (!sys::RestartLoopbackIn(r.netns.get(), home_.get()).ok()) return false;
  // A netlink or UDP socket is freed after an RCU grace period: a run that used one just
  // before its end may still count it. Once more after a pause before the namespace goes.
  if (!NoSocketsIn(r.netns.get())) {
    std::this_thread::sleep_for(kSocketFreeWait);
    if (!NoSocketsIn(r.netns.get())) return false;
  }
  auto compared = sys::ReadNetFilesIn(r.netns.get(), home_.get(), kCompared);
  return compared.ok() && Comparable(std::move(*compared)) == fresh_;
}

NetNamespaceStats NetNamespacePool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  NetNamespaceStats s = stats_;
  s.kept = static_cast<long>(kept_.size());
  s.checking = checking_;
  return s;
}

void NetNamespacePool::Refill() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (!returned_.empty()) {
      // One check at a time (it may wait up to kRunEndWaitMs): a stop waits for one at most.
      Returned r = std::move(returned_.front());
      returned_.pop_front();
      lock.unlock();
      const bool clean = Clean(r);
      lock.lock();
      --checking_;
      if (!clean) {
        ++stats_.discarded;
        continue;  // r's namespace goes as r does (its last reference)
      }
      ++stats_.recycled;
      kept_.push_back({std::move(r.owner), std::move(r.netns)});
      if (kept_.size() > size_) kept_.pop_front();
      continue;
    }
    if (ready_.size() >= size_) {
      wake_.wait(lock);
      continue;
    }
    lock.unlock();
    auto made = sys::MakeLoopbackNetNamespace(home_.get());
    if (made.ok() && fresh_.empty() && sys::RestartLoopbackIn(made->get(), home_.get()).ok()) {
      auto fresh = sys::ReadNetFilesIn(made->get(), home_.get(), kCompared);
      if (fresh.ok()) fresh_ = Comparable(std::move(*fresh));
    }
    lock.lock();
    if (made.ok()) {
      ready_.push_back(std::move(*made));
      continue;
    }
    ++stats_.failures;
    stats_.last_error = made.error().message;
    wake_.wait_for(lock, kRetryAfterFailure, [this] { return stopping_; });
  }
}

}  // namespace sandrun::sandbox
