#include "sandbox/network.h"

#include <nftables/libnftables.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>

#include "sys/netns.h"
#include "sys/sock_diag.h"
#include "sys/syscalls.h"

namespace sandrun::sandbox {
namespace {

constexpr int kReadyTimeoutMs = 5000;
constexpr int kStopTimeoutMs = 2000;
// slirp4netns holds one host socket per connection of the run, and a few fds of its own: a
// run's 64 processes x 256 files could otherwise ask it for 16 000 host sockets.
constexpr rlim_t kSlirpMaxFds = 512;

// What slirp4netns wrote (its fds 1 and 2 are a memfd), for an error message.
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

// Waits for slirp4netns' ready byte; false on timeout or when it exited first (EOF).
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

Result<std::unique_ptr<RunNetwork>> RunNetwork::Start(pid_t pid, uid_t uid, gid_t gid,
                                                      const NetworkSpec& spec, RunCgroup* cgroup) {
  auto plan = MakeFirewallPlan(spec);
  if (!plan.ok()) return plan.error();
  std::unique_ptr<RunNetwork> net(new RunNetwork());
  auto userns = sys::OpenNamespace(pid, "user");
  if (!userns.ok()) return MakeError(ErrorKind::kSystem, userns.error().message);
  auto netns = sys::OpenNamespace(pid, "net");
  if (!netns.ok()) return MakeError(ErrorKind::kSystem, netns.error().message);
  net->netns_ = std::move(*netns);
  auto exit_pipe = sys::MakePipe();
  auto ready_pipe = sys::MakePipe();
  if (!exit_pipe.ok()) return MakeError(ErrorKind::kSystem, exit_pipe.error().message);
  if (!ready_pipe.ok()) return MakeError(ErrorKind::kSystem, ready_pipe.error().message);
  auto log = sys::MemfdWith("slirp4netns-log", "");
  if (!log.ok()) return MakeError(ErrorKind::kSystem, log.error().message);
  // fds 3..6 of slirp4netns, as SpawnWithOwnTun numbers them.
  const std::vector<std::string> argv = {
      spec.slirp_path,     "--configure",     "--mtu=65520",  "--disable-host-loopback",
      "--enable-seccomp",  "--exit-fd=3",     "--ready-fd=4", "--userns-path=/proc/self/fd/5",
      "--netns-type=path", "/proc/self/fd/6", kSlirpTap};
  auto spawned = sys::SpawnWithOwnTun(
      argv, uid, gid,
      {exit_pipe->read.get(), ready_pipe->write.get(), userns->get(), net->netns_.get()},
      log->get(), kSlirpMaxFds);
  if (!spawned.ok()) return MakeError(ErrorKind::kSystem, "network: " + spawned.error().message);
  net->slirp_pid_ = *spawned;
  // Before it is ready, hence before the run can ask it for a host socket: every socket
  // buffer it makes for the run is charged to the run (cgroup.h AddMemoryOnly).
  if (cgroup != nullptr) {
    if (Status s = cgroup->AddMemoryOnly(net->slirp_pid_); !s.ok()) {
      return MakeError(ErrorKind::kSystem,
                       "network: slirp4netns into the run's cgroup: " + s.error().message);
    }
  }
  net->exit_write_ = std::move(exit_pipe->write);
  exit_pipe->read.Reset();
  ready_pipe->write.Reset();
  if (!WaitReady(ready_pipe->read.get())) {
    return MakeError(ErrorKind::kSystem, "network: slirp4netns did not configure tap0 within " +
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
  // slirp4netns' host sockets first, while it still holds them (their inodes are its fds):
  // reset by the run's side first, it would close them and leave orphans in the host's
  // namespace, retransmitting to a peer that does not read for up to ~15 minutes.
  if (auto inodes = sys::SocketInodesOf(slirp_pid_); inodes.ok() && !inodes->empty()) {
    (void)sys::DestroyTcpSockets(-1, &*inodes);
  }
  // Then everything left in the run's namespace (orphans of its closed sockets among them).
  if (netns_.valid()) (void)sys::DestroyTcpSockets(netns_.get(), nullptr);
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
