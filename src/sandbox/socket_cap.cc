// libbpf loads bpf/socket_cap.bpf.c, compiled by clang -target bpf at build time and
// embedded in the daemon (socket_cap_object.cc, generated).
#include "sandbox/socket_cap.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "sys/syscalls.h"
#include "sys/unique_fd.h"

extern "C" const unsigned char sandrun_socket_cap_object[];
extern "C" const unsigned long sandrun_socket_cap_object_size;

namespace sandrun::sandbox {

SocketShare SocketShare::For(uint64_t memory_bytes) {
  SocketShare share;
  // Half of the budget at most for the forced charges; a socket counts for itself and, when
  // it connects inside the sandbox, for the accepted end it makes live (two sockets).
  const int64_t per_cap = 2 * kForcedBytesPerSocket;
  share.cap = std::min<int64_t>(kMaxSockets, static_cast<int64_t>(memory_bytes / 2) / per_cap);
  share.cap = std::max<int64_t>(share.cap, 1);
  const uint64_t forced = static_cast<uint64_t>(share.cap * per_cap);
  share.tcp_limit_bytes = memory_bytes > forced ? memory_bytes - forced : 0;
  return share;
}

struct SocketCap::State {
  bpf_object* object = nullptr;
  bpf_link* links[3] = {nullptr, nullptr, nullptr};
  int slots_fd = -1;
  int caps_fd = -1;
  int live_fd = -1;
  std::atomic<uint64_t> last_slot{0};
  ~State() {
    for (bpf_link* link : links) {
      if (link != nullptr) bpf_link__destroy(link);
    }
    if (object != nullptr) bpf_object__close(object);
  }
};

namespace {

Error BpfError(const std::string& what, int rc) {
  const int err = rc < 0 ? -rc : sys::LastErrno();
  return MakeError(ErrorKind::kSystem, "socket cap: " + what + ": " + std::strerror(err), err);
}

int SilentPrint(enum libbpf_print_level, const char*, va_list) { return 0; }

}  // namespace

SocketCap::SocketCap(std::unique_ptr<State> state) : state_(std::move(state)) {}
SocketCap::~SocketCap() = default;

Result<std::shared_ptr<SocketCap>> SocketCap::Attach(const std::string& dir) {
  libbpf_set_print(SilentPrint);  // errors come back as values, named here
  auto state = std::make_unique<State>();
  LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "sandrun_socket_cap");
  state->object =
      bpf_object__open_mem(sandrun_socket_cap_object, sandrun_socket_cap_object_size, &opts);
  if (state->object == nullptr) return BpfError("open the BPF object", -sys::LastErrno());
  if (int rc = bpf_object__load(state->object); rc != 0) {
    return BpfError("load the BPF programs (CONFIG_CGROUP_BPF, BPF_F_CLONE sk storage)", rc);
  }
  sys::UniqueFd cgroup(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!cgroup.valid()) return sys::ErrnoError("socket cap: open " + dir);
  const char* names[3] = {"sock_create", "sock_release", "sock_ops"};
  for (int i = 0; i < 3; ++i) {
    bpf_program* prog = bpf_object__find_program_by_name(state->object, names[i]);
    if (prog == nullptr) return BpfError(std::string("no program ") + names[i], -ENOENT);
    state->links[i] = bpf_program__attach_cgroup(prog, cgroup.get());
    if (state->links[i] == nullptr) {
      return BpfError(std::string("attach ") + names[i] + " to " + dir, -sys::LastErrno());
    }
  }
  state->slots_fd = bpf_object__find_map_fd_by_name(state->object, "slots");
  state->caps_fd = bpf_object__find_map_fd_by_name(state->object, "caps");
  state->live_fd = bpf_object__find_map_fd_by_name(state->object, "live");
  if (state->slots_fd < 0 || state->caps_fd < 0 || state->live_fd < 0) {
    return BpfError("find the maps", -ENOENT);
  }
  return std::shared_ptr<SocketCap>(new SocketCap(std::move(state)));
}

namespace {

// A cgroup's id is its kernfs inode number (64-bit kernels), what bpf_get_current_cgroup_id
// returns.
Result<uint64_t> CgroupId(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return sys::ErrnoError("socket cap: stat " + dir);
  return static_cast<uint64_t>(st.st_ino);
}

}  // namespace

Result<SocketCap::Place> SocketCap::Register(const std::string& dir, int64_t cap) {
  Place place;
  place.slot = ++state_->last_slot;
  const int64_t zero = 0;
  if (int rc = bpf_map_update_elem(state_->live_fd, &place.slot, &zero, BPF_ANY); rc != 0) {
    return BpfError("register " + dir, rc);
  }
  Status s = SetCap(place.slot, cap);
  auto id = s.ok() ? Alias(dir, place.slot) : Result<uint64_t>(s.error());
  if (!id.ok()) {
    Forget(place);
    return id.error();
  }
  place.cgroup_id = *id;
  return place;
}

Result<uint64_t> SocketCap::Alias(const std::string& dir, uint64_t slot) {
  auto id = CgroupId(dir);
  if (!id.ok()) return id.error();
  if (int rc = bpf_map_update_elem(state_->slots_fd, &*id, &slot, BPF_ANY); rc != 0) {
    return BpfError("register " + dir, rc);
  }
  return *id;
}

void SocketCap::Unalias(uint64_t cgroup_id) {
  (void)bpf_map_delete_elem(state_->slots_fd, &cgroup_id);
}

Status SocketCap::SetCap(uint64_t slot, int64_t cap) {
  if (int rc = bpf_map_update_elem(state_->caps_fd, &slot, &cap, BPF_ANY); rc != 0) {
    return BpfError("set the cap of slot " + std::to_string(slot), rc);
  }
  return OkStatus();
}

void SocketCap::Forget(const Place& place) {
  if (place.cgroup_id != 0) Unalias(place.cgroup_id);
  (void)bpf_map_delete_elem(state_->caps_fd, &place.slot);
  (void)bpf_map_delete_elem(state_->live_fd, &place.slot);
}

int64_t SocketCap::Live(uint64_t slot) const {
  int64_t n = -1;
  if (bpf_map_lookup_elem(state_->live_fd, &slot, &n) != 0) return -1;
  return n;
}

}  // namespace sandrun::sandbox
