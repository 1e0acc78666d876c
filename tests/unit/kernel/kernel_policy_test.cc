// The idle and least-recently-used policy of live kernels (kernel/kernel_policy.h).
#include "kernel/kernel_policy.h"

#include <boost/test/unit_test.hpp>

namespace kernel = sandrun::kernel;
using Keys = std::vector<std::string>;

BOOST_AUTO_TEST_SUITE(KernelPolicy)

BOOST_AUTO_TEST_CASE(ends_kernels_idle_past_the_limit_but_never_one_in_use) {
  std::vector<kernel::KernelSlot> slots = {
      {"old", 1000, false}, {"busy", 0, true}, {"recent", 9500, false}};
  BOOST_TEST(kernel::IdleKernels(slots, 10'000, 5000) == Keys{"old"});
  BOOST_TEST(kernel::IdleKernels(slots, 10'000, 500) == (Keys{"old", "recent"}));
  BOOST_TEST(kernel::IdleKernels(slots, 10'000, 100'000).empty());
}

BOOST_AUTO_TEST_CASE(evicts_least_recently_used_first) {
  std::vector<kernel::KernelSlot> slots = {{"b", 200, false}, {"a", 100, false}, {"c", 300, false}};
  auto room = kernel::MakeRoom(slots, 3);
  BOOST_TEST(room.enough);
  BOOST_TEST(room.evict == Keys{"a"});
  room = kernel::MakeRoom(slots, 2);
  BOOST_TEST(room.evict == (Keys{"a", "b"}));
  room = kernel::MakeRoom(slots, 4);
  BOOST_TEST(room.enough);
  BOOST_TEST(room.evict.empty());
}

BOOST_AUTO_TEST_CASE(never_evicts_a_kernel_in_use_and_says_when_there_is_no_room) {
  std::vector<kernel::KernelSlot> slots = {{"a", 100, true}, {"b", 200, false}};
  auto room = kernel::MakeRoom(slots, 2);
  BOOST_TEST(room.enough);
  BOOST_TEST(room.evict == Keys{"b"});
  slots[1].in_use = true;
  room = kernel::MakeRoom(slots, 2);
  BOOST_TEST(!room.enough);
  BOOST_TEST(room.evict.empty());
}

BOOST_AUTO_TEST_CASE(a_kernel_on_the_same_terms_is_kept) {
  kernel::KernelTerms live, wanted;
  BOOST_TEST(kernel::ReplaceReason(live, wanted).empty());
  live.network = wanted.network = true;
  BOOST_TEST(kernel::ReplaceReason(live, wanted).empty());
  wanted.limits.wall_time_ms = 1;  // per run: no reason to replace the kernel
  wanted.limits.cpu_time_s = 1;
  BOOST_TEST(kernel::ReplaceReason(live, wanted).empty());
}

BOOST_AUTO_TEST_CASE(a_run_asking_for_the_network_on_or_off_replaces_the_kernel) {
  kernel::KernelTerms off, on;
  on.network = true;
  BOOST_TEST(kernel::ReplaceReason(off, on) ==
             "the kernel was restarted because this run asks for the network on and the kernel "
             "ran with it off");
  BOOST_TEST(kernel::ReplaceReason(on, off) ==
             "the kernel was restarted because this run asks for the network off and the kernel "
             "ran with it on");
}

BOOST_AUTO_TEST_CASE(other_limits_replace_the_kernel_and_are_named_first) {
  kernel::KernelTerms live, wanted;
  wanted.limits.cgroup.memory_bytes = live.limits.cgroup.memory_bytes + (512ull << 20);
  wanted.network = true;
  BOOST_TEST(kernel::ReplaceReason(live, wanted).find("other limits") != std::string::npos);
  wanted = live;
  wanted.limits.disk_bytes += 1;
  BOOST_TEST(kernel::ReplaceReason(live, wanted).find("other limits") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(only_the_limits_that_changed_are_named_with_both_values) {
  kernel::KernelTerms live, wanted;
  live.limits.cgroup.memory_bytes = 512ull << 20;
  live.limits.cgroup.processes = 64;
  live.limits.disk_bytes = 256ull << 20;
  wanted = live;
  wanted.limits.cgroup.memory_bytes = 1024ull << 20;
  BOOST_TEST(kernel::ReplaceReason(live, wanted) ==
             "this run asks for other limits than the kernel was started with (memory_mb 512 "
             "-> 1024)");
  wanted.limits.cgroup.processes = 32;
  BOOST_TEST(kernel::ReplaceReason(live, wanted) ==
             "this run asks for other limits than the kernel was started with (memory_mb 512 "
             "-> 1024, processes 64 -> 32)");
}

BOOST_AUTO_TEST_SUITE_END()
