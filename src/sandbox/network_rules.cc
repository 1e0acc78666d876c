#include "sandbox/network_rules.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>

namespace sandrun::sandbox {
namespace {

int MaxBits(int family) { return family == AF_INET ? 32 : 128; }

void ClearHostBits(Cidr& c) {
  for (int bit = c.prefix; bit < MaxBits(c.family); ++bit) {
    c.bytes[static_cast<size_t>(bit / 8)] &= static_cast<uint8_t>(~(0x80u >> (bit % 8)));
  }
}

bool Less(const Cidr& a, const Cidr& b) {
  if (a.family != b.family) return a.family < b.family;
  if (a.bytes != b.bytes) return a.bytes < b.bytes;
  return a.prefix < b.prefix;
}

// `{ a, b, c }` of the networks of one family, or "" when there are none.
std::string SetOf(const std::vector<Cidr>& cidrs, int family) {
  std::vector<Cidr> mine;
  for (const Cidr& c : cidrs) {
    if (c.family == family) mine.push_back(c);
  }
  mine = Collapse(std::move(mine));
  std::string out;
  for (const Cidr& c : mine) out += (out.empty() ? "{ " : ", ") + c.Text();
  return out.empty() ? out : out + " }";
}

// One rule per family that has networks: `ip daddr { ... } <verdict>`.
void AddRules(std::string& out, const std::vector<Cidr>& cidrs, const std::string& verdict,
              const std::string& comment) {
  const std::string v4 = SetOf(cidrs, AF_INET), v6 = SetOf(cidrs, AF_INET6);
  if (v4.empty() && v6.empty()) return;
  out += "    # " + comment + "\n";
  if (!v4.empty()) out += "    ip daddr " + v4 + " " + verdict + "\n";
  if (!v6.empty()) out += "    ip6 daddr " + v6 + " " + verdict + "\n";
}

}  // namespace

std::string Cidr::Text() const {
  char buf[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(family, bytes.data(), buf, sizeof buf);
  return std::string(buf) + "/" + std::to_string(prefix);
}

bool Cidr::Contains(const Cidr& other) const {
  if (family != other.family || other.prefix < prefix) return false;
  Cidr masked = other;
  masked.prefix = prefix;
  ClearHostBits(masked);
  return masked.bytes == bytes;
}

Result<Cidr> ParseCidr(std::string_view text) {
  const std::string item(text);
  const size_t slash = item.find('/');
  const std::string address = item.substr(0, slash);
  Cidr c;
  if (::inet_pton(AF_INET, address.c_str(), c.bytes.data()) == 1) {
    c.family = AF_INET;
  } else if (::inet_pton(AF_INET6, address.c_str(), c.bytes.data()) == 1) {
    c.family = AF_INET6;
  } else {
    return MakeError(ErrorKind::kInvalidInput,
                     "'" + item + "' is not an IPv4 or IPv6 address or network");
  }
  c.prefix = MaxBits(c.family);
  if (slash != std::string::npos) {
    const std::string bits = item.substr(slash + 1);
    if (bits.empty() || bits.size() > 3 || bits.find_first_not_of("0123456789") != bits.npos ||
        std::atoi(bits.c_str()) > c.prefix) {
      return MakeError(ErrorKind::kInvalidInput, "'" + item + "': the prefix length must be 0 to " +
                                                     std::to_string(c.prefix));
    }
    c.prefix = std::atoi(bits.c_str());
  }
  ClearHostBits(c);
  return c;
}

const std::vector<RefusedRange>& RefusedRanges() {
  static const std::vector<RefusedRange> kRanges = {
      {"0.0.0.0/8", "\"this network\" (RFC 791)"},
      {"10.0.0.0/8", "private use (RFC 1918)"},
      {"100.64.0.0/10", "shared address space, carrier-grade NAT (RFC 6598)"},
      {"127.0.0.0/8", "loopback (RFC 1122): the host's, past the run's own lo"},
      {"169.254.0.0/16", "link-local (RFC 3927): cloud metadata services"},
      {"172.16.0.0/12", "private use (RFC 1918): Docker's bridges"},
      {"192.0.0.0/24", "IETF protocol assignments (RFC 6890)"},
      {"192.0.2.0/24", "documentation TEST-NET-1 (RFC 5737)"},
      {"192.88.99.0/24", "6to4 relay anycast, deprecated (RFC 7526)"},
      {"192.168.0.0/16", "private use (RFC 1918)"},
      {"198.18.0.0/15", "benchmarking (RFC 2544)"},
      {"198.51.100.0/24", "documentation TEST-NET-2 (RFC 5737)"},
      {"203.0.113.0/24", "documentation TEST-NET-3 (RFC 5737)"},
      {"224.0.0.0/4", "multicast (RFC 5771)"},
      {"240.0.0.0/4", "reserved (RFC 1112)"},
      {"255.255.255.255/32", "limited broadcast (RFC 919)"},
      {"::/128", "unspecified (RFC 4291)"},
      {"::1/128", "loopback (RFC 4291)"},
      {"::/96", "IPv4-compatible, deprecated (RFC 4291): embeds IPv4"},
      {"::ffff:0.0.0.0/96", "IPv4-mapped (RFC 4291): embeds IPv4"},
      {"64:ff9b::/96", "NAT64 well-known prefix (RFC 6052): embeds IPv4, refused whole"},
      {"64:ff9b:1::/48", "local-use IPv4/IPv6 translation (RFC 8215)"},
      {"100::/64", "discard-only (RFC 6666)"},
      {"2001::/23",
       "IETF protocol assignments (RFC 2928): Teredo, benchmarking, ORCHID; refused whole, "
       "its few global parts are service anycasts"},
      {"2001:db8::/32", "documentation (RFC 3849)"},
      {"2002::/16", "6to4 (RFC 3056): embeds IPv4"},
      {"3fff::/20", "documentation (RFC 9637)"},
      {"5f00::/16", "SRv6 SIDs (RFC 9602)"},
      {"fc00::/7", "unique local (RFC 4193)"},
      {"fe80::/10", "link-local (RFC 4291)"},
      {"fec0::/10", "site-local, deprecated (RFC 3879)"},
      {"ff00::/8", "multicast (RFC 4291)"},
  };
  return kRanges;
}

std::vector<Cidr> Collapse(std::vector<Cidr> cidrs) {
  std::sort(cidrs.begin(), cidrs.end(), Less);
  std::vector<Cidr> out;
  for (const Cidr& c : cidrs) {
    // Sorted by address then prefix: a network that contains c is the last kept one (a
    // network's first address sorts before everything inside it).
    if (!out.empty() && out.back().Contains(c)) continue;
    out.push_back(c);
  }
  return out;
}

std::string BuildRuleset(const FirewallPlan& plan) {
  std::vector<Cidr> refused;
  for (const RefusedRange& r : RefusedRanges()) refused.push_back(*ParseCidr(r.cidr));
  const std::string reject = "reject with icmpx admin-prohibited";
  const std::string tap = std::string("\"") + kSlirpTap + "\"";
  std::string out;
  out += "table inet sandrun {\n";
  out += "  counter rx {\n  }\n  counter tx {\n  }\n";
  out += "  chain output {\n";
  out += "    type filter hook output priority 0; policy accept;\n";
  out += "    # the run's own loopback (its 127.0.0.1 and its own tap address)\n";
  out += "    oifname \"lo\" accept\n";
  out += "    # slirp4netns' DNS forwarder, the only address of its network the run may use\n";
  out += std::string("    ip daddr ") + kSlirpDns + " udp dport 53 counter name \"tx\" accept\n";
  out += std::string("    ip daddr ") + kSlirpDns + " tcp dport 53 counter name \"tx\" accept\n";
  AddRules(out, {*ParseCidr(kSlirpCidr)}, reject, "the rest of slirp4netns' network");
  AddRules(out, plan.host_addresses, reject, "the host's own addresses, never allowed");
  AddRules(out, plan.allowed, "counter name \"tx\" accept", "network_allow_cidrs");
  AddRules(out, refused, reject, "special-purpose ranges that are not globally reachable");
  out += "    oifname " + tap + " counter name \"tx\"\n";
  out += "  }\n";
  out += "  chain input {\n";
  out += "    type filter hook input priority 0; policy accept;\n";
  out += "    iifname " + tap + " counter name \"rx\"\n";
  out += "  }\n";
  out += "}\n";
  return out;
}

CounterBytes ParseCounters(std::string_view text) {
  CounterBytes out;
  auto bytes_after = [&](std::string_view name) -> int64_t {
    const size_t at = text.find("counter " + std::string(name) + " {");
    if (at == std::string_view::npos) return -1;
    const size_t b = text.find("bytes ", at);
    const size_t end = text.find('}', at);
    if (b == std::string_view::npos || b > end) return -1;
    return std::strtoll(std::string(text.substr(b + 6, 24)).c_str(), nullptr, 10);
  };
  out.rx = bytes_after("rx");
  out.tx = bytes_after("tx");
  return out;
}

}  // namespace sandrun::sandbox
