#include "sandbox/zygote.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "sys/syscalls.h"

namespace sandrun::sandbox {
namespace {
constexpr int kReadyTimeoutMs = 30000;
constexpr int kPreloadReadyTimeoutMs = 120000;  // numpy, pandas, matplotlib: seconds on a busy host
}  // namespace

Result<std::unique_ptr<Zygote>> Zygote::Start(const ZygoteOptions& options) {
  const int count = std::max(1, options.servers);
  std::vector<Server> servers(static_cast<size_t>(count));
  std::vector<sys::UniqueFd> theirs;
  std::string fd_list;  // the zygote's ends, fds 3, 4, ...: its first argument
  for (int i = 0; i < count; ++i) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
      return sys::ErrnoError("socketpair for the zygote");
    }
    servers[static_cast<size_t>(i)].sock = sys::UniqueFd(pair[0]);
    theirs.emplace_back(pair[1]);
    fd_list += (i == 0 ? "" : ",") + std::to_string(3 + i);
  }
  std::vector<std::string> argv = {options.python, options.script_dir + "/sandrun_zygote.py",
                                   fd_list, options.module_dir, std::to_string(::getpid())};
  if (options.kernel) argv.push_back("--kernel");
  argv.insert(argv.end(), options.preload.begin(), options.preload.end());
  std::vector<char*> args, envp;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  std::vector<std::string> env = options.env;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  // Each end to its place in two steps, through fds above all of them: a later end's place
  // may be an earlier end's fd (the ends are distinct and above 2, so `above` > 2 + count).
  int above = 0;
  for (const auto& fd : theirs) above = std::max(above, fd.get() + 1);
  for (int i = 0; i < count; ++i) {
    posix_spawn_file_actions_adddup2(&actions, theirs[static_cast<size_t>(i)].get(), above + i);
  }
  for (int i = 0; i < count; ++i) posix_spawn_file_actions_adddup2(&actions, above + i, 3 + i);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3 + count);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  ::sigemptyset(&none);
  ::sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, args[0], &actions, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return MakeError(ErrorKind::kSystem, "posix_spawn " + argv[0] + ": " + std::strerror(rc), rc);
  }
  // Only the zygote holds its ends: a zygote that exits (a refused zygote_preload module) is
  // then an EOF to AwaitReady at once, not a wait for its timeout.
  theirs.clear();
  auto zygote = std::unique_ptr<Zygote>(new Zygote(std::move(servers), pid));
  zygote->ready_timeout_ms_ =
      options.preload.empty() && !options.kernel ? kReadyTimeoutMs : kPreloadReadyTimeoutMs;
  zygote->what_ = argv[0] + " " + argv[1];
  // Ready once its Python has started and imported its C side: else the daemon says so now
  // (and runs start without it) rather than at every run. The kernel zygote's imports take
  // seconds: its first Spawn waits for them instead of the daemon's start.
  if (!options.kernel) {
    for (Server& server : zygote->servers_) {
      if (Status s = zygote->AwaitReady(server); !s.ok()) return s.error();
    }
  }
  return zygote;
}

Status Zygote::AwaitReady(Server& server) {
  if (server.ready) return OkStatus();
  if (!server.failed) {
    pollfd ready{server.sock.get(), POLLIN, 0};
    char word[8] = {};
    server.failed = ::poll(&ready, 1, ready_timeout_ms_) != 1 ||
                    ::recv(server.sock.get(), word, sizeof word, 0) != 5 ||
                    std::string(word, 5) != "ready";
    server.ready = !server.failed;
  }
  if (server.failed) {
    return MakeError(ErrorKind::kSystem, "it did not start (" + what_ +
                                             "; is _sandrun_zygote.so in the directory of "
                                             "sandrund? a module it imports that failed says so "
                                             "above)");
  }
  return OkStatus();
}

Zygote::Server& Zygote::Acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  Server* free = nullptr;
  freed_.wait(lock, [&] {
    for (Server& server : servers_) {
      if (!server.busy) free = &server;
    }
    return free != nullptr;
  });
  free->busy = true;
  return *free;
}

void Zygote::Release(Server& server) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    server.busy = false;
  }
  freed_.notify_one();
}

Zygote::~Zygote() {
  servers_.clear();  // the sockets: its forks exit at their EOF, or die with it
  (void)sys::KillPid(pid_);
  (void)sys::Reap(pid_);
}

Result<ZygoteChild> Zygote::Spawn(const ZygoteRequest& request, const std::vector<int>& fds) {
  const std::string bytes = EncodeZygoteRequest(request);
  Server& server = Acquire();
  const Status ready = AwaitReady(server);
  Result<ZygoteChild> child =
      ready.ok() ? Exchange(server, bytes, fds) : Result<ZygoteChild>(ready.error());
  Release(server);
  ++(child.ok() ? served_ : failed_);
  return child;
}

Result<ZygoteChild> Zygote::Exchange(Server& server, const std::string& bytes,
                                     const std::vector<int>& fds) {
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  ssize_t sent;
  do {
    sent = ::sendmsg(server.sock.get(), &msg, MSG_NOSIGNAL);
  } while (sent < 0 && sys::LastErrno() == EINTR);
  if (sent < 0) return sys::ErrnoError("send to the zygote");
  int32_t body[2] = {-1, 0};
  iovec riov{body, sizeof body};
  alignas(cmsghdr) char rcontrol[CMSG_SPACE(sizeof(int))];
  msghdr reply{};
  reply.msg_iov = &riov;
  reply.msg_iovlen = 1;
  reply.msg_control = rcontrol;
  reply.msg_controllen = sizeof rcontrol;
  ssize_t got;
  do {
    got = ::recvmsg(server.sock.get(), &reply, MSG_CMSG_CLOEXEC);
  } while (got < 0 && sys::LastErrno() == EINTR);
  if (got != static_cast<ssize_t>(sizeof body)) {
    return MakeError(ErrorKind::kSystem, "the zygote is gone");
  }
  ZygoteChild child;
  for (cmsghdr* r = CMSG_FIRSTHDR(&reply); r != nullptr; r = CMSG_NXTHDR(&reply, r)) {
    if (r->cmsg_level == SOL_SOCKET && r->cmsg_type == SCM_RIGHTS) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(r), sizeof fd);
      child.pidfd = sys::UniqueFd(fd);
    }
  }
  if (body[0] <= 0 || !child.pidfd.valid()) {
    return MakeError(ErrorKind::kSystem,
                     std::string("zygote clone(CLONE_NEWUSER|...): ") + std::strerror(body[1]),
                     body[1]);
  }
  child.pid = body[0];
  return child;
}

}  // namespace sandrun::sandbox
