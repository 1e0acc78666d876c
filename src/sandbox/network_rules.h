// The refusal rules of a run's network, as data and as an nftables ruleset.
// Pure: no side effects, not child-safe (allocates). network.h applies them.
//
// A run with the network has one interface, tap0, behind sandrun-slirp (libslirp: user-mode
// TCP/IP on the host: every connection the program makes becomes a socket of that process on the
// host). So what the program may reach is decided inside the run's own network namespace,
// before a packet reaches sandrun-slirp, by rules that host root installs there before the
// program starts and that the program (no capabilities, netfilter netlink refused by
// seccomp) cannot change.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace sandrun::sandbox {

// The run's side of the user-mode network (slirp4netns(1)'s defaults, which sandrun-slirp
// keeps): the tap's network and address, its gateway (never the host's loopback: libslirp's
// disable_host_loopback) and its DNS forwarder, and the tap's MTU.
inline constexpr char kSlirpCidr[] = "10.0.2.0/24";
inline constexpr char kSlirpGuest[] = "10.0.2.100";
inline constexpr char kSlirpGateway[] = "10.0.2.2";
inline constexpr char kSlirpDns[] = "10.0.2.3";
inline constexpr char kSlirpTap[] = "tap0";
inline constexpr int kSlirpMtu = 65520;

// An IPv4 or IPv6 network: address bytes (4 or 16 used) and prefix length. Bits past the
// prefix are zero.
struct Cidr {
  int family = 0;  // AF_INET or AF_INET6
  std::array<uint8_t, 16> bytes{};
  int prefix = 0;

  // "10.0.0.0/8", "fe80::/10"; a single address prints with /32 or /128.
  std::string Text() const;
  // True when every address of `other` is in this network (same family).
  bool Contains(const Cidr& other) const;
  bool operator==(const Cidr& other) const {
    return family == other.family && bytes == other.bytes && prefix == other.prefix;
  }
};

// "a.b.c.d", "a.b.c.d/n", an IPv6 address with or without /n (no zone). Bits past the prefix
// are cleared ("10.1.2.3/8" is 10.0.0.0/8). Errors: kInvalidInput, naming the text.
Result<Cidr> ParseCidr(std::string_view text);

// One range the program may not reach, with the registry entry it comes from.
struct RefusedRange {
  const char* cidr;
  const char* why;
};
// The IANA IPv4 and IPv6 special-purpose address registries' entries that are not globally
// reachable (RFC 6890 and successors), plus multicast, loopback and the IPv6 forms that map
// or embed IPv4 addresses (so no IPv4 refusal can be bypassed through them).
const std::vector<RefusedRange>& RefusedRanges();

// `cidrs` of one family sorted, duplicates and networks inside another of the list removed
// (nftables interval sets refuse overlapping elements).
std::vector<Cidr> Collapse(std::vector<Cidr> cidrs);

// What one run's rules are made of.
struct FirewallPlan {
  // Every address of every host interface (read for each run: they change).
  std::vector<Cidr> host_addresses;
  // network_allow_cidrs: reachable although in a refused range (never a host address).
  std::vector<Cidr> allowed;
};

// The nftables ruleset (nft -f syntax) of table `inet sandrun`. In order, for packets the
// run sends: its own lo is accepted; libslirp's DNS forwarder (kSlirpDns port 53, UDP and
// TCP) is accepted; the rest of libslirp's network, then the host's own addresses, are
// refused; `allowed` is accepted; RefusedRanges() are refused; everything else goes out
// through tap0 and is counted. Refusals are `reject` (the connect fails at once with
// "administratively prohibited", no timeout). Named counters `rx` and `tx` count the bytes of
// IP packets received on and sent through tap0.
std::string BuildRuleset(const FirewallPlan& plan);

// The byte counts from the text of `nft list counters table inet sandrun` (counter rx ...
// bytes N ..., counter tx ...). -1 for a counter not found.
struct CounterBytes {
  int64_t rx = -1;
  int64_t tx = -1;
};
CounterBytes ParseCounters(std::string_view nft_output);

}  // namespace sandrun::sandbox
