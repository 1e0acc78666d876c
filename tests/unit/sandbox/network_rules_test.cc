// The refusal rules of a run's network (network_rules.h): CIDR parsing, collapsing, the
// registry table and the ruleset text. Pure; no root needed. That the kernel accepts the
// ruleset is checked by integration.Network (and by RulesetLoadsInANetns below when root).
#define BOOST_TEST_MODULE network_rules
#include "sandbox/network_rules.h"

#include <sys/socket.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

namespace sandbox = sandrun::sandbox;

namespace {
sandbox::Cidr C(const char* text) {
  auto c = sandbox::ParseCidr(text);
  BOOST_TEST_REQUIRE(c.ok(), text);
  return *c;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(NetworkRules)

BOOST_AUTO_TEST_CASE(parses_addresses_and_networks_of_both_families) {
  BOOST_TEST(C("10.0.5.20").Text() == "10.0.5.20/32");
  BOOST_TEST(C("10.0.5.20/32").Text() == "10.0.5.20/32");
  BOOST_TEST(C("10.1.2.3/8").Text() == "10.0.0.0/8");  // host bits cleared
  BOOST_TEST(C("fe80::1/10").Text() == "fe80::/10");
  BOOST_TEST(C("::1").Text() == "::1/128");
  BOOST_TEST(C("0.0.0.0/0").prefix == 0);
  BOOST_TEST(C("2001:db8::/32").family == AF_INET6);
}

BOOST_AUTO_TEST_CASE(refuses_what_is_not_a_network) {
  for (const char* bad : {"", "10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/-1", "10.0.0",
                          "example.com", "10.0.0.0/8 ", "fe80::1%eth0", "1.2.3.4/0x8"}) {
    BOOST_TEST(!sandbox::ParseCidr(bad).ok(), bad);
  }
}

BOOST_AUTO_TEST_CASE(contains_compares_within_one_family) {
  BOOST_TEST(C("10.0.0.0/8").Contains(C("10.200.3.4")));
  BOOST_TEST(!C("10.0.0.0/8").Contains(C("11.0.0.1")));
  BOOST_TEST(!C("10.0.0.0/8").Contains(C("0.0.0.0/0")));
  BOOST_TEST(C("::/96").Contains(C("::1")));
  BOOST_TEST(!C("::/0").Contains(C("10.0.0.1")));
}

BOOST_AUTO_TEST_CASE(collapse_drops_duplicates_and_nested_networks) {
  auto out = sandbox::Collapse({C("240.0.0.0/4"), C("255.255.255.255"), C("10.1.0.0/16"),
                                C("10.0.0.0/8"), C("10.0.0.0/8"), C("192.168.0.0/16")});
  std::vector<std::string> text;
  for (const auto& c : out) text.push_back(c.Text());
  BOOST_TEST(text == (std::vector<std::string>{"10.0.0.0/8", "192.168.0.0/16", "240.0.0.0/4"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(every_registry_entry_parses_and_the_issue_ranges_are_all_there) {
  std::vector<sandbox::Cidr> refused;
  for (const auto& r : sandbox::RefusedRanges()) {
    auto c = sandbox::ParseCidr(r.cidr);
    BOOST_TEST_REQUIRE(c.ok(), r.cidr);
    BOOST_TEST(c->Text() == r.cidr);  // written in canonical form
    BOOST_TEST(std::string(r.why).size() > 5u);
    refused.push_back(*c);
  }
  auto covered = [&](const char* addr) {
    for (const auto& c : refused) {
      if (c.Contains(C(addr))) return true;
    }
    return false;
  };
  // One address of every refused range, and cloud metadata, Docker's bridge.
  for (const char* addr : {"127.0.0.1",
                           "127.1.2.3",
                           "10.0.0.1",
                           "172.17.0.1",
                           "192.168.1.1",
                           "100.64.0.1",
                           "100.127.255.254",
                           "169.254.169.254",
                           "224.0.0.251",
                           "239.255.255.250",
                           "0.0.0.0",
                           "0.1.2.3",
                           "192.0.0.170",
                           "192.0.2.1",
                           "198.18.0.1",
                           "198.19.255.1",
                           "198.51.100.1",
                           "203.0.113.1",
                           "240.0.0.1",
                           "255.255.255.255",
                           "::1",
                           "::",
                           "fe80::1",
                           "fc00::1",
                           "fd00::2",
                           "ff02::1",
                           "100::1",
                           "2001:db8::1",
                           "2001::1",
                           "2001:2::1",
                           "64:ff9b::a00:1",
                           "::ffff:10.0.0.1",
                           "::ffff:127.0.0.1",
                           "2002:a00:1::1"}) {
    BOOST_TEST(covered(addr), addr);
  }
  // And public addresses stay reachable.
  for (const char* addr : {"1.1.1.1", "8.8.8.8", "151.101.0.223", "100.128.0.1", "172.32.0.1",
                           "2a04:4e42::223", "2606:4700::1111"}) {
    BOOST_TEST(!covered(addr), addr);
  }
}

BOOST_AUTO_TEST_CASE(ruleset_orders_dns_host_allowed_refused) {
  sandbox::FirewallPlan plan;
  plan.host_addresses = {C("192.0.2.2"), C("198.18.77.1"), C("fd00::2")};
  plan.allowed = {C("198.18.77.2/32"), C("10.0.5.0/24")};
  const std::string rules = sandbox::BuildRuleset(plan);
  const size_t lo = rules.find("oifname \"lo\" accept");
  const size_t dns = rules.find("ip daddr 10.0.2.3 udp dport 53");
  const size_t slirp = rules.find("ip daddr { 10.0.2.0/24 } reject");
  const size_t host = rules.find("ip daddr { 192.0.2.2/32, 198.18.77.1/32 } reject");
  const size_t host6 = rules.find("ip6 daddr { fd00::2/128 } reject");
  const size_t allowed = rules.find("ip daddr { 10.0.5.0/24, 198.18.77.2/32 } counter");
  const size_t refused = rules.find("ip daddr { 0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10");
  const size_t refused6 = rules.find("ip6 daddr { ::/96, ::ffff:0.0.0.0/96");
  BOOST_TEST_REQUIRE(lo != std::string::npos);
  BOOST_TEST_REQUIRE(dns != std::string::npos);
  BOOST_TEST_REQUIRE(slirp != std::string::npos);
  BOOST_TEST_REQUIRE(host != std::string::npos);
  BOOST_TEST_REQUIRE(host6 != std::string::npos);
  BOOST_TEST_REQUIRE(allowed != std::string::npos);
  BOOST_TEST_REQUIRE(refused != std::string::npos);
  BOOST_TEST_REQUIRE(refused6 != std::string::npos);
  BOOST_TEST((lo < dns && dns < slirp && slirp < host && host < allowed && allowed < refused));
  // 255.255.255.255 is inside 240.0.0.0/4: an interval set may not hold both.
  BOOST_TEST(rules.find("255.255.255.255") == std::string::npos);
  BOOST_TEST(rules.find("counter name \"rx\"") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(ruleset_without_allowed_networks_has_no_allow_rule) {
  const std::string rules = sandbox::BuildRuleset({});
  BOOST_TEST(rules.find("network_allow_cidrs") == std::string::npos);
  BOOST_TEST(rules.find("the host's own addresses") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(parses_nft_counter_listing) {
  const auto bytes = sandbox::ParseCounters(
      "table inet sandrun {\n\tcounter rx {\n\t\tpackets 12 bytes 3456\n\t}\n\tcounter tx {\n"
      "\t\tpackets 7 bytes 890\n\t}\n}\n");
  BOOST_TEST(bytes.rx == 3456);
  BOOST_TEST(bytes.tx == 890);
  BOOST_TEST(sandbox::ParseCounters("nothing").rx == -1);
}

BOOST_AUTO_TEST_SUITE_END()
