#include "sandbox/init_plan.h"

#include <cstring>

namespace sandrun::sandbox {
namespace {

constexpr char kMagic[] = "sandrun-init-plan-1";
// Bounds on what a plan may hold, so a corrupt memfd cannot make init allocate much.
constexpr uint32_t kMaxItems = 1 << 16;
constexpr uint32_t kMaxString = 1 << 20;

class Writer {
 public:
  void U32(uint32_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void I64(int64_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void Str(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  void Strs(const std::vector<std::string>& v) {
    U32(static_cast<uint32_t>(v.size()));
    for (const auto& s : v) Str(s);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool ok() const { return ok_; }
  bool done() const { return ok_ && in_.empty(); }
  uint32_t U32() { return Fixed<uint32_t>(); }
  int64_t I64() { return Fixed<int64_t>(); }
  std::string Str() {
    uint32_t n = U32();
    if (!ok_ || n > kMaxString || n > in_.size()) return Fail<std::string>();
    std::string s(in_.substr(0, n));
    in_.remove_prefix(n);
    return s;
  }
  uint32_t Count() {
    uint32_t n = U32();
    return n > kMaxItems ? Fail<uint32_t>() : n;
  }
  std::vector<std::string> Strs() {
    std::vector<std::string> v(ok_ ? Count() : 0);
    for (auto& s : v) s = Str();
    return v;
  }

 private:
  template <typename T>
  T Fixed() {
    T v{};
    if (!ok_ || in_.size() < sizeof v) return Fail<T>();
    std::memcpy(&v, in_.data(), sizeof v);
    in_.remove_prefix(sizeof v);
    return v;
  }
  template <typename T>
  T Fail() {
    ok_ = false;
    return T{};
  }
  std::string_view in_;
  bool ok_ = true;
};

}  // namespace

std::string EncodeInitPlan(const InitPlan& plan) {
  Writer w;
  w.Str(kMagic);
  w.U32(plan.uid);
  w.U32(plan.gid);
  w.I64(plan.oom_score_adj);
  w.Str(plan.workdir);
  w.Str(plan.program);
  w.Strs(plan.argv);
  w.Strs(plan.envp);
  w.U32(static_cast<uint32_t>(plan.rlimits.size()));
  for (const auto& r : plan.rlimits) {
    w.I64(r.resource);
    w.I64(static_cast<int64_t>(r.soft));
    w.I64(static_cast<int64_t>(r.hard));
  }
  w.U32(static_cast<uint32_t>(plan.seccomp.size()));
  for (const auto& f : plan.seccomp) {
    w.U32(f.code);
    w.U32(f.jt);
    w.U32(f.jf);
    w.U32(f.k);
  }
  w.U32(static_cast<uint32_t>(plan.user_sysctls.size()));
  for (const auto& [name, value] : plan.user_sysctls) {
    w.Str(name);
    w.Str(value);
  }
  return w.Take();
}

Result<InitPlan> DecodeInitPlan(std::string_view bytes) {
  Reader r(bytes);
  if (r.Str() != kMagic) return MakeError(ErrorKind::kProtocol, "not an init plan (wrong magic)");
  InitPlan plan;
  plan.uid = r.U32();
  plan.gid = r.U32();
  plan.oom_score_adj = static_cast<int>(r.I64());
  plan.workdir = r.Str();
  plan.program = r.Str();
  plan.argv = r.Strs();
  plan.envp = r.Strs();
  plan.rlimits.resize(r.ok() ? r.Count() : 0);
  for (auto& rl : plan.rlimits) {
    rl.resource = static_cast<int>(r.I64());
    rl.soft = static_cast<rlim_t>(r.I64());
    rl.hard = static_cast<rlim_t>(r.I64());
  }
  plan.seccomp.resize(r.ok() ? r.Count() : 0);
  for (auto& f : plan.seccomp) {
    f.code = static_cast<uint16_t>(r.U32());
    f.jt = static_cast<uint8_t>(r.U32());
    f.jf = static_cast<uint8_t>(r.U32());
    f.k = r.U32();
  }
  plan.user_sysctls.resize(r.ok() ? r.Count() : 0);
  for (auto& [name, value] : plan.user_sysctls) {
    name = r.Str();
    value = r.Str();
  }
  if (!r.done())
    return MakeError(ErrorKind::kProtocol, "init plan truncated or with trailing bytes");
  if (plan.program.empty() || plan.program[0] != '/' || plan.argv.empty()) {
    return MakeError(ErrorKind::kProtocol, "init plan without an absolute program path and argv");
  }
  return plan;
}

namespace {
constexpr char kZygoteMagic[] = "sandrun-zygote-request-1";
}  // namespace

std::string EncodeZygoteRequest(const ZygoteRequest& request) {
  Writer w;
  w.Str(kZygoteMagic);
  w.U32(request.owner_uid);
  w.U32(request.new_net ? 1 : 0);
  w.Str(request.root_dir);
  w.Str(request.put_old);
  w.Str(request.hostname);
  w.U32(static_cast<uint32_t>(request.steps.size()));
  for (const auto& step : request.steps) {
    w.U32(static_cast<uint32_t>(step.op));
    w.U32((step.has_source ? 1 : 0) | (step.has_data ? 2 : 0));
    w.Str(step.source);
    w.Str(step.target);
    w.Str(step.data);
    w.I64(static_cast<int64_t>(step.flags));
  }
  return w.Take();
}

Result<ZygoteRequest> DecodeZygoteRequest(std::string_view bytes) {
  Reader r(bytes);
  if (r.Str() != kZygoteMagic) return MakeError(ErrorKind::kProtocol, "not a zygote request");
  ZygoteRequest request;
  request.owner_uid = r.U32();
  request.new_net = r.U32() != 0;
  request.root_dir = r.Str();
  request.put_old = r.Str();
  request.hostname = r.Str();
  request.steps.resize(r.ok() ? r.Count() : 0);
  for (auto& step : request.steps) {
    step.op = static_cast<int>(r.U32());
    const uint32_t has = r.U32();
    step.has_source = (has & 1) != 0;
    step.has_data = (has & 2) != 0;
    step.source = r.Str();
    step.target = r.Str();
    step.data = r.Str();
    step.flags = static_cast<uint64_t>(r.I64());
  }
  if (!r.done()) return MakeError(ErrorKind::kProtocol, "zygote request truncated");
  return request;
}

}  // namespace sandrun::sandbox
