#include "kernel/kernel_manager.h"

#include <zmq.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "kernel/kernel_policy.h"
#include "sys/signal_free_thread.h"
#include "util/text.h"

namespace sandrun::kernel {
namespace {

constexpr size_t kMaxRemembered = 10000;

KernelTerms TermsOf(const KernelSpec& spec) { return {spec.limits, spec.network.enabled}; }

}  // namespace

struct KernelManager::Entry {
  std::string key;
  std::unique_ptr<Kernel> kernel;  // null while it boots
  bool leased = false;
  int64_t last_used_ms = 0;
  std::string lost_reason = "the kernel died";
};

KernelManager::Lease::Lease(KernelManager* manager, std::shared_ptr<Entry> entry)
    : manager_(manager), entry_(std::move(entry)) {}

KernelManager::Lease::Lease(Lease&& other) noexcept
    : manager_(other.manager_), entry_(std::move(other.entry_)) {}

KernelManager::Lease& KernelManager::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Release();
    manager_ = other.manager_;
    entry_ = std::move(other.entry_);
  }
  return *this;
}

KernelManager::Lease::~Lease() { Release(); }

Kernel& KernelManager::Lease::kernel() const { return *entry_->kernel; }

void KernelManager::Lease::SetLostReason(std::string why) {
  std::lock_guard<std::mutex> lock(manager_->mu_);
  entry_->lost_reason = std::move(why);
}

void KernelManager::Lease::Release() {
  if (!entry_) return;
  std::unique_ptr<Kernel> gone;
  {
    std::lock_guard<std::mutex> lock(manager_->mu_);
    entry_->leased = false;
    entry_->last_used_ms = manager_->NowMs();
    if (!entry_->kernel->alive() || manager_->stopping_) {
      auto it = manager_->live_.find(entry_->key);
      if (it != manager_->live_.end() && it->second == entry_) manager_->live_.erase(it);
      if (!manager_->stopping_) manager_->Remember(entry_->key, entry_->lost_reason);
      gone = std::move(entry_->kernel);
    }
  }
  entry_.reset();
  // `gone` (if any) is ended here, outside the lock.
}

KernelManager::KernelManager(const sandbox::SandboxRunner* runner, ManagerOptions options)
    : runner_(runner),
      options_(std::move(options)),
      zmq_context_(zmq_ctx_new()),
      pool_(options_.pool, [this](const KernelSpec& spec, const std::string& name) {
        return BootKernel(spec, name, nullptr);
      }) {}

void KernelManager::StartReaperOnce() {
  // Started with the first kernel, not with the manager: until then the daemon stays as it
  // was without kernels (its start-up self-test and `sandrund check` run single-threaded).
  std::call_once(reaper_started_, [this] {
    // The reaper takes no signal: the daemon's stop signals are for its sigwait thread.
    reaper_ = sys::StartSignalFreeThread([this] { Reaper(); });
  });
}

KernelManager::~KernelManager() {
  EndAll();
  if (reaper_.joinable()) reaper_.join();
  zmq_ctx_term(zmq_context_);
}

int64_t KernelManager::NowMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void KernelManager::Remember(const std::string& key, const std::string& why) {
  if (ended_.size() >= kMaxRemembered) ended_.erase(ended_.begin());
  ended_[key] = why;
}

Status KernelManager::ClaimUnderLock(const std::string& key, const KernelSpec& spec,
                                     const std::shared_ptr<Entry>& entry, Acquired* out,
                                     std::vector<std::unique_ptr<Kernel>>* gone) {
  if (stopping_) return MakeError(ErrorKind::kUnavailable, "sandrun is stopping");
  auto it = live_.find(key);
  if (it != live_.end()) {
    Entry& e = *it->second;
    if (e.leased || !e.kernel)
      return MakeError(ErrorKind::kUnavailable, "the session's kernel is in use");
    const std::string why = ReplaceReason(TermsOf(e.kernel->spec()), TermsOf(spec));
    if (e.kernel->alive() && why.empty()) {
      e.leased = true;
      out->lease = Lease(this, it->second);
      out->status = "kept";
      return OkStatus();
    }
    out->status = "restarted";
    out->note = e.kernel->alive() ? why : "the kernel died between runs";
    gone->push_back(std::move(e.kernel));
    live_.erase(it);
  } else if (auto why = ended_.find(key); why != ended_.end()) {
    out->status = "restarted";
    out->note = why->second;
    ended_.erase(why);
  }
  std::vector<KernelSlot> slots;
  for (const auto& [k, e] : live_) slots.push_back({k, e->last_used_ms, e->leased});
  Room room = MakeRoom(slots, options_.max_kernels);
  if (!room.enough) {
    return MakeError(ErrorKind::kUnavailable, "all " + std::to_string(options_.max_kernels) +
                                                  " kernels (max_kernels) are running cells now");
  }
  for (const auto& k : room.evict) {
    auto victim = live_.find(k);
    gone->push_back(std::move(victim->second->kernel));
    live_.erase(victim);
    Remember(k, "the kernel was ended to make room for another session's (max_kernels " +
                    std::to_string(options_.max_kernels) + ")");
  }
  live_[key] = entry;  // counts against max_kernels while it boots
  return OkStatus();
}

Result<std::unique_ptr<Kernel>> KernelManager::BootKernel(const KernelSpec& spec,
                                                          const std::string& name,
                                                          const Populate& populate) {
  auto made = Kernel::Create(options_.runs_dir + "/" + name, name, spec);
  if (!made.ok()) return made.error();
  // One cgroup for the restore and the kernel: the session's tmpfs pages
  // stay charged to the kernel's memory limit.
  // Freezable: the kernel is frozen between cells (Kernel::Boot, Kernel::Execute).
  sandbox::CgroupLimits cgroup_limits = spec.limits.cgroup;
  cgroup_limits.freezable = true;
  auto cgroup = runner_->CreateCgroup((*made)->id(), cgroup_limits);
  if (!cgroup.ok()) return MakeError(ErrorKind::kSystem, cgroup.error().message);
  if (populate) {
    if (Status s = populate((*made)->workspace(), cgroup->get()); !s.ok()) return s.error();
  }
  Status s = (*made)->Boot(*runner_, zmq_context_, std::move(*cgroup));
  if (!s.ok()) return s.error();
  return std::move(*made);
}

Result<std::unique_ptr<Kernel>> KernelManager::TakePooled(const KernelSpec& spec,
                                                          const Populate& populate) {
  pool_.Activate();
  std::unique_ptr<Kernel> pooled = pool_.Take(spec);
  if (!pooled) return std::unique_ptr<Kernel>();
  // On cgroup v2 a helper in the kernel's cgroup would freeze with it: the kernel is thawed
  // while the helper copies (it has run no code but its own start).
  const bool thaw = runner_->cgroups() != nullptr && runner_->cgroups()->version() != "v1";
  if (Status s = pooled->FillFrozen(populate, thaw); !s.ok()) return s.error();
  const std::string name = "k-" + util::RandomHex(8);
  if (Status s = pooled->Rename(options_.runs_dir + "/" + name, name); !s.ok()) {
    std::fprintf(stderr, "sandrund: kernel pool: %s; a new kernel is started instead\n",
                 s.error().message.c_str());
    return std::unique_ptr<Kernel>();
  }
  return pooled;
}

Result<std::unique_ptr<Kernel>> KernelManager::StartKernel(const KernelSpec& spec,
                                                           const Populate& populate) {
  auto pooled = TakePooled(spec, populate);
  if (!pooled.ok() || *pooled) return pooled;
  // A kernel that ends while starting is started once more, from scratch (a new directory,
  // cgroup and restore): now and then ipykernel exits with code 1 before it answers, printing
  // nothing (cause not found yet; seen about once in three full test runs). The first
  // failure is logged.
  for (int attempt = 0;; ++attempt) {
    auto made = BootKernel(spec, "k-" + util::RandomHex(8), populate);
    if (made.ok()) return made;
    if (attempt > 0 || made.error().message.find("ended while starting") == std::string::npos) {
      return made.error();
    }
    std::fprintf(stderr, "sandrund: %s; starting it again\n", made.error().message.c_str());
  }
}

Result<KernelManager::Acquired> KernelManager::Acquire(const std::string& key,
                                                       const KernelSpec& spec,
                                                       const Populate& populate) {
  StartReaperOnce();
  Acquired out;
  out.status = "started";
  std::vector<std::unique_ptr<Kernel>> gone;  // ended outside the lock
  auto entry = std::make_shared<Entry>();
  entry->key = key;
  entry->leased = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (Status s = ClaimUnderLock(key, spec, entry, &out, &gone); !s.ok()) return s.error();
    if (out.lease.held()) return out;  // kept
  }
  gone.clear();
  auto kernel = StartKernel(spec, populate);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (kernel.ok()) {
      entry->kernel = std::move(*kernel);
    } else if (auto it = live_.find(key); it != live_.end() && it->second == entry) {
      live_.erase(it);
    }
  }
  if (!kernel.ok()) return kernel.error();
  out.lease = Lease(this, entry);
  return out;
}

Result<std::unique_ptr<Kernel>> KernelManager::StartForRun(const KernelSpec& spec,
                                                           const Populate& populate) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return MakeError(ErrorKind::kUnavailable, "sandrun is stopping");
  }
  return StartKernel(spec, populate);
}

void KernelManager::End(const std::string& key, const std::string& why) {
  std::unique_ptr<Kernel> gone;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(key);
  if (it == live_.end() || it->second->leased || !it->second->kernel) return;
  gone = std::move(it->second->kernel);
  live_.erase(it);
  Remember(key, why);
}

int KernelManager::EndIdle() {
  std::vector<std::unique_ptr<Kernel>> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<KernelSlot> slots;
    for (const auto& [k, e] : live_) {
      if (!e->leased && e->kernel) {
        e->kernel->DrainOutput();
        e->kernel->DropMessages();
        if (!e->kernel->alive()) e->last_used_ms = 0;  // dead between runs: end it now
      }
      slots.push_back({k, e->last_used_ms, e->leased || !e->kernel});
    }
    for (const auto& k : IdleKernels(slots, NowMs(), options_.idle_s * 1000)) {
      auto it = live_.find(k);
      const bool died = !it->second->kernel->alive();
      gone.push_back(std::move(it->second->kernel));
      live_.erase(it);
      Remember(k, died ? "the kernel died between runs"
                       : "the kernel was ended after kernel_idle_s (" +
                             std::to_string(options_.idle_s) + " s) without a run");
    }
  }
  return static_cast<int>(gone.size());
}

void KernelManager::EndAll() {
  pool_.Stop();
  std::vector<std::unique_ptr<Kernel>> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto it = live_.begin(); it != live_.end();) {
      if (!it->second->leased && it->second->kernel) {
        gone.push_back(std::move(it->second->kernel));
        it = live_.erase(it);
      } else {
        ++it;  // ended when its run releases it
      }
    }
  }
  wake_.notify_all();
}

bool KernelManager::Has(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.count(key) > 0;
}

int64_t KernelManager::live() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(live_.size());
}

void KernelManager::Reaper() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, std::chrono::seconds(1));
    if (stopping_) break;
    lock.unlock();
    (void)EndIdle();
    lock.lock();
  }
}

}  // namespace sandrun::kernel
