// Which runs a pooled kernel serves (kernel/kernel_pool.h PoolServes).
#include "kernel/kernel_pool.h"

#include <boost/test/unit_test.hpp>

namespace kernel = sandrun::kernel;

namespace {

kernel::KernelSpec Default() {
  kernel::KernelSpec spec;
  spec.env = {"HOME=/home/user", "TZ=UTC"};
  spec.limits.cgroup.memory_bytes = 512u << 20;
  spec.limits.cgroup.processes = 64;
  spec.limits.file_size_bytes = 64u << 20;
  spec.limits.disk_bytes = 100u << 20;
  spec.setup_files = {{"setup.py", "print(1)"}, {"sitecustomize.py", "pass"}};
  return spec;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(KernelPoolServes)

BOOST_AUTO_TEST_CASE(serves_a_run_asking_for_exactly_its_spec) {
  BOOST_TEST(kernel::PoolServes(Default(), Default()));
  kernel::KernelSpec later = Default();
  later.start_timeout_ms = 5;  // only how long a boot may take: not the kernel's
  BOOST_TEST(kernel::PoolServes(Default(), later));
}

// A run's wall time, CPU time and output bound each of its cells (ExecuteLimits), not the
// kernel: a run that asks for other ones still takes a pooled kernel.
BOOST_AUTO_TEST_CASE(serves_a_run_whatever_its_per_cell_limits) {
  kernel::KernelSpec wanted = Default();
  wanted.limits.wall_time_ms = 30'000;
  wanted.limits.cpu_time_s = int64_t{1} << 30;
  wanted.limits.output_bytes = 4096;
  BOOST_TEST(kernel::PoolServes(Default(), wanted));
}

BOOST_AUTO_TEST_CASE(never_serves_a_run_with_other_limits_env_files_or_stdin) {
  kernel::KernelSpec wanted = Default();
  wanted.limits.disk_bytes += 1;
  BOOST_TEST(!kernel::PoolServes(Default(), wanted));
  wanted = Default();
  wanted.limits.cgroup.memory_bytes *= 2;
  BOOST_TEST(!kernel::PoolServes(Default(), wanted));
  wanted = Default();
  wanted.limits.cgroup.processes = 8;
  BOOST_TEST(!kernel::PoolServes(Default(), wanted));
  wanted = Default();
  wanted.limits.open_files = 32;
  BOOST_TEST(!kernel::PoolServes(Default(), wanted));
  wanted = Default();
  wanted.env.push_back("PIP_INDEX_URL=http://mirror/simple");
  BOOST_TEST(!kernel::PoolServes(Default(), wanted));
  wanted = Default();
  wanted.setup_files.emplace_back("stdin", "line\n");  // read once, at the kernel's start
  BOOST_TEST(!kernel::PoolServes(Default(), wanted));
  wanted = Default();
  wanted.setup_files[0].second = "print(2)";
  BOOST_TEST(!kernel::PoolServes(Default(), wanted));
  wanted = Default();
  wanted.host_uid += 1;
  BOOST_TEST(!kernel::PoolServes(Default(), wanted));
  wanted = Default();
  wanted.python = "/usr/local/bin/python3";
  BOOST_TEST(!kernel::PoolServes(Default(), wanted));
}

BOOST_AUTO_TEST_CASE(never_serves_or_holds_a_kernel_with_the_network) {
  kernel::KernelSpec wanted = Default();
  wanted.network.enabled = true;
  BOOST_TEST(!kernel::PoolServes(Default(), wanted));
  BOOST_TEST(!kernel::PoolServes(wanted, wanted));
}

BOOST_AUTO_TEST_SUITE_END()
