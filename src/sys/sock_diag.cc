#include "sys/sock_diag.h"

#include <dirent.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sys/netns.h"
#include "sys/syscalls.h"
#include "sys/unique_fd.h"

namespace sandrun::sys {
namespace {

constexpr size_t kMaxSockets = 1 << 20;
constexpr unsigned kAllStates = ~0u;

struct Request {
  nlmsghdr header;
  inet_diag_req_v2 body;
};

Request MakeRequest(uint16_t type, uint16_t flags, uint8_t family) {
  Request r{};
  r.header.nlmsg_len = sizeof r;
  r.header.nlmsg_type = type;
  r.header.nlmsg_flags = flags;
  r.body.sdiag_family = family;
  r.body.sdiag_protocol = IPPROTO_TCP;
  r.body.idiag_states = kAllStates;
  return r;
}

// A NETLINK_SOCK_DIAG socket in `netns_fd` (-1: here).
Result<UniqueFd> OpenDiagSocket(int netns_fd) {
  UniqueFd home;
  if (netns_fd >= 0) {
    auto here = OpenThreadNetNamespace();
    if (!here.ok()) return here.error();
    home = std::move(*here);
    if (Status s = EnterNetNamespace(netns_fd); !s.ok()) return s.error();
  }
  UniqueFd sock(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  const int err = errno;
  // A thread left in a run's namespace would open every later socket of the daemon there.
  if (home.valid() && !EnterNetNamespace(home.get()).ok()) std::abort();
  if (!sock.valid()) {
    errno = err;
    return ErrnoError("socket(NETLINK_SOCK_DIAG)");
  }
  return sock;
}

// The socket ids of one family's dump that `keep` takes.
Result<std::vector<inet_diag_sockid>> Dump(int sock, uint8_t family, const SocketFilter& keep) {
  Request req = MakeRequest(SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, family);
  if (::send(sock, &req, sizeof req, 0) != static_cast<ssize_t>(sizeof req)) {
    return ErrnoError("sock_diag dump request");
  }
  std::vector<inet_diag_sockid> ids;
  alignas(nlmsghdr) static thread_local char buf[32768];
  for (;;) {
    ssize_t n = ::recv(sock, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoError("sock_diag dump");
    int len = static_cast<int>(n);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_type == NLMSG_DONE) return ids;
      if (h->nlmsg_type == NLMSG_ERROR) {
        const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
        errno = -e->error;
        return ErrnoError("sock_diag dump");
      }
      if (h->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg))) continue;
      const auto* msg = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
      if (!keep(*msg)) continue;
      if (ids.size() < kMaxSockets) ids.push_back(msg->id);
    }
  }
}

// SOCK_DESTROY of one socket; 0 or the errno of the answer.
int DestroyOne(int sock, uint8_t family, const inet_diag_sockid& id) {
  Request req = MakeRequest(SOCK_DESTROY, NLM_F_REQUEST | NLM_F_ACK, family);
  req.body.id = id;
  if (::send(sock, &req, sizeof req, 0) != static_cast<ssize_t>(sizeof req)) return errno;
  alignas(nlmsghdr) char buf[512];
  ssize_t n;
  do {
    n = ::recv(sock, buf, sizeof buf, 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return errno;
  const auto* h = reinterpret_cast<const nlmsghdr*>(buf);
  const int len = static_cast<int>(n);
  if (!NLMSG_OK(h, len) || h->nlmsg_type != NLMSG_ERROR) return EPROTO;
  return -static_cast<const nlmsgerr*>(NLMSG_DATA(h))->error;
}

}  // namespace

Result<DestroyCount> DestroyTcpSockets(int netns_fd, const std::set<ino_t>* inodes) {
  return DestroyTcpSocketsIf(netns_fd, [inodes](const inet_diag_msg& msg) {
    return inodes == nullptr || inodes->count(msg.idiag_inode) != 0;
  });
}

Result<DestroyCount> DestroyTcpSocketsIf(int netns_fd, const SocketFilter& keep) {
  auto sock = OpenDiagSocket(netns_fd);
  if (!sock.ok()) return sock.error();
  DestroyCount count;
  for (uint8_t family : {AF_INET, AF_INET6}) {
    auto ids = Dump(sock->get(), family, keep);
    if (!ids.ok()) return ids.error();
    count.found += static_cast<int>(ids->size());
    for (const inet_diag_sockid& id : *ids) {
      const int err = DestroyOne(sock->get(), family, id);
      if (err == 0) {
        ++count.destroyed;
      } else if (err != ENOENT) {
        ++count.refused;
        count.last_errno = err;
      }
    }
  }
  return count;
}

Result<std::set<ino_t>> SocketInodesOf(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return ErrnoError("opendir " + dir);
  std::set<ino_t> out;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char target[64] = {};
    const std::string link = dir + "/" + e->d_name;
    if (::readlink(link.c_str(), target, sizeof target - 1) <= 0) continue;
    unsigned long long inode = 0;
    if (std::sscanf(target, "socket:[%llu]", &inode) == 1) out.insert(inode);
  }
  ::closedir(d);
  return out;
}

}  // namespace sandrun::sys
