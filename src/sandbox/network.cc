#include "sandbox/network.h"

#include <nftables/libnftables.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "sandbox/slirp_closed.h"
#include "sys/netns.h"
#include "sys/sock_diag.h"
#include "sys/syscalls.h"

namespace sandrun::sandbox {
namespace {

constexpr int kReadyTimeoutMs = 5000;
constexpr int kStopTimeoutMs = 2000;
// sandrun-slirp holds one host socket per connection of the run, and a few fds of its own: a
// run's 64 processes x 256 files could otherwise ask it for 16 000 host sockets.
constexpr rlim_t kSlirpMaxFds = 512;

// What sandrun-slirp wrote (its fds 1 and 2 are a memfd), for an error message.
std::string LogText(int memfd) {
  char buf[4096];
  ssize_t n = ::pread(memfd, buf, sizeof buf, 0);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// The firewall of this run: the host's addresses now, and the allowed networks.
Result<FirewallPlan> MakeFirewallPlan(const NetworkSpec& spec) {
  FirewallPlan plan;
  for (const std::string& text : spec.allow_cidrs) {
    auto cidr = ParseCidr(text);
    if (!cidr.ok())
      return MakeError(ErrorKind::kSystem, "network_allow_cidrs: " + cidr.error().message);
    plan.allowed.push_back(*cidr);
  }
  auto addresses = sys::InterfaceAddresses();
  if (!addresses.ok()) return MakeError(ErrorKind::kSystem, addresses.error().message);
  for (const std::string& text : *addresses) {
    if (auto cidr = ParseCidr(text); cidr.ok()) plan.host_addresses.push_back(*cidr);
  }
  return plan;
}

// The records sandrun-slirp wrote to `memfd` (slirp_closed.h), at most kMaxClosedRecords.
std::vector<ClosedTcp> ReadClosed(int memfd) {
  std::vector<ClosedTcp> out(kMaxClosedRecords);
  if (memfd < 0) return {};
  const ssize_t n = ::pread(memfd, out.data(), out.size() * sizeof(ClosedTcp), 0);
  out.resize(n > 0 ? static_cast<size_t>(n) / sizeof(ClosedTcp) : 0);
  return out;
}

// sandrun-slirp: `configured`, else beside the running executable (as sandrun-init).
Result<std::string> SlirpPath(const std::string& configured) {
  if (!configured.empty()) return configured;
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return MakeError(ErrorKind::kSystem, "network: readlink /proc/self/exe");
  std::string path(self, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/') + 1) + "sandrun-slirp";
}

// Waits for sandrun-slirp's ready byte; false on timeout or when it exited first (EOF).
bool WaitReady(int ready_fd) {
  pollfd p{ready_fd, POLLIN, 0};
  if (::poll(&p, 1, kReadyTimeoutMs) != 1) return false;
  char byte = 0;
  return ::read(ready_fd, &byte, 1) == 1;
}

}  // namespace

Result<std::string> RunNftIn(int netns_fd, const std::string& commands) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  auto home = sys::OpenThreadNetNamespace();
  if (!home.ok()) return MakeError(ErrorKind::kSystem, home.error().message);
  if (Status s = sys::EnterNetNamespace(netns_fd); !s.ok()) {
    return MakeError(ErrorKind::kSystem, "firewall: " + s.error().message);
  }
  std::string output, errors;
  int rc = -1;
  if (nft_ctx* ctx = nft_ctx_new(NFT_CTX_DEFAULT)) {
    nft_ctx_buffer_output(ctx);
    nft_ctx_buffer_error(ctx);
    rc = nft_run_cmd_from_buffer(ctx, commands.c_str());
    if (const char* o = nft_ctx_get_output_buffer(ctx)) output = o;
    if (const char* e = nft_ctx_get_error_buffer(ctx)) errors = e;
    nft_ctx_free(ctx);
  } else {
    errors = "nft_ctx_new failed";
  }
  // A worker thread left in a run's namespace would make every later connection of the
  // daemon from it go there: it cannot go on.
  if (!sys::EnterNetNamespace(home->get()).ok()) std::abort();
  if (rc != 0) return MakeError(ErrorKind::kSystem, "firewall (nftables): " + errors);
  return output;
}

Result<std::unique_ptr<RunNetwork>> RunNetwork::Start(pid_t pid, const NetworkSpec& spec,
                                                      RunCgroup* cgroup) {
  auto plan = MakeFirewallPlan(spec);
  if (!plan.ok()) return plan.error();
  std::unique_ptr<RunNetwork> net(new RunNetwork());
  auto netns = sys::OpenNamespace(pid, "net");
  if (!netns.ok()) return MakeError(ErrorKind::kSystem, netns.error().message);
  net->netns_ = std::move(*netns);
  auto tap = sys::TapInNamespace(
      net->netns_.get(), {kSlirpTap, kSlirpMtu, kSlirpGuest, "255.255.255.0", kSlirpGateway});
  if (!tap.ok()) return MakeError(ErrorKind::kSystem, "network: tap0: " + tap.error().message);
  auto exit_pipe = sys::MakePipe();
  auto ready_pipe = sys::MakePipe();
  if (!exit_pipe.ok()) return MakeError(ErrorKind::kSystem, exit_pipe.error().message);
  if (!ready_pipe.ok()) return MakeError(ErrorKind::kSystem, ready_pipe.error().message);
  auto log = sys::MemfdWith("sandrun-slirp-log", "");
  if (!log.ok()) return MakeError(ErrorKind::kSystem, log.error().message);
  auto closed = sys::MemfdWith("sandrun-slirp-closed", "");
  if (!closed.ok()) return MakeError(ErrorKind::kSystem, closed.error().message);
  auto path = SlirpPath(spec.slirp_path);
  if (!path.ok()) return path.error();
  // fds 3, 4, 5, 6 of sandrun-slirp (slirp_main.cc).
  auto spawned =
      sys::SpawnAs({*path}, spec.uid, spec.gid,
                   {tap->get(), exit_pipe->read.get(), ready_pipe->write.get(), closed->get()},
                   log->get(), kSlirpMaxFds);
  if (!spawned.ok()) return MakeError(ErrorKind::kSystem, "network: " + spawned.error().message);
  net->slirp_pid_ = *spawned;
  net->closed_ = std::move(*closed);
  // Before it is ready, hence before the run can ask it for a host socket: every socket
  // buffer it makes for the run is charged to the run (cgroup.h AddMemoryOnly).
  if (cgroup != nullptr) {
    if (Status s = cgroup->AddMemoryOnly(net->slirp_pid_); !s.ok()) {
      return MakeError(ErrorKind::kSystem,
                       "network: sandrun-slirp into the run's cgroup: " + s.error().message);
    }
  }
  net->exit_write_ = std::move(exit_pipe->write);
  exit_pipe->read.Reset();
  ready_pipe->write.Reset();
  if (!WaitReady(ready_pipe->read.get())) {
    return MakeError(ErrorKind::kSystem, "network: sandrun-slirp was not ready within " +
                                             std::to_string(kReadyTimeoutMs / 1000) +
                                             " s: " + LogText(log->get()));
  }
  if (auto done = RunNftIn(net->netns_.get(), BuildRuleset(*plan)); !done.ok()) {
    return done.error();
  }
  return net;
}

void RunNetwork::EndConnections() {
  if (slirp_pid_ <= 0) return;
  // sandrun-slirp's host sockets first, while it still holds them (their inodes are its fds):
  // reset by the run's side first, it would close them and leave orphans in the host's
  // namespace, retransmitting to a peer that does not read for up to ~15 minutes.
  if (auto inodes = sys::SocketInodesOf(slirp_pid_); inodes.ok() && !inodes->empty()) {
    (void)sys::DestroyTcpSockets(-1, &*inodes);
  }
  // Then everything left in the run's namespace (orphans of its closed sockets among them).
  if (netns_.valid()) (void)sys::DestroyTcpSockets(netns_.get(), nullptr);
  // Last, the host sockets it closed during the run with their connection open: orphans
  // now (no inode), found by their addresses and ports.
  const std::vector<ClosedTcp> records = ReadClosed(closed_.get());
  if (records.empty()) return;
  (void)sys::DestroyTcpSocketsIf(-1, [&records](const inet_diag_msg& msg) {
    if (msg.idiag_inode != 0) return false;
    for (const ClosedTcp& r : records) {
      if (r.family == msg.idiag_family && r.sport == msg.id.idiag_sport &&
          r.dport == msg.id.idiag_dport && std::memcmp(r.src, msg.id.idiag_src, 16) == 0 &&
          std::memcmp(r.dst, msg.id.idiag_dst, 16) == 0) {
        return true;
      }
    }
    return false;
  });
}

RunNetwork::~RunNetwork() {
  EndConnections();
  exit_write_.Reset();
  if (slirp_pid_ > 0) (void)sys::ReapWithin(slirp_pid_, kStopTimeoutMs);
}

CounterBytes RunNetwork::Usage() const {
  auto listed = RunNftIn(netns_.get(), "list counters table inet sandrun");
  if (!listed.ok()) return {};
  return ParseCounters(*listed);
}

}  // namespace sandrun::sandbox
