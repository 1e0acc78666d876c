// The one conversion of a run's limits into sandbox and cgroup limits (run/sandbox_specs.h):
// every kind of sandbox the daemon starts gets the same cgroup memory and pids for the same
// limits, and each use's own budget where it has one.
#define BOOST_TEST_MODULE sandbox_specs
#include "run/sandbox_specs.h"

#include <algorithm>
#include <boost/test/unit_test.hpp>

#include "run/run_steps.h"

using namespace sandrun;
using run::SandboxUse;

namespace {

constexpr SandboxUse kEveryUse[] = {SandboxUse::kStep, SandboxUse::kInstallStep, SandboxUse::kWarm,
                                    SandboxUse::kKernel, SandboxUse::kEnvironmentBuild};

config::Config TestConfig() {
  config::Config c;
  c.sandbox_uid = 64123;
  c.sandbox_gid = 64124;
  c.install_wall_time_s = 333;
  c.install_disk_mb = 777;
  c.environment_build_wall_time_s = 999;
  c.network_allow_cidrs = {"10.1.2.3/32"};
  c.ceilings.cpu_time_s = 120;
  c.ceilings.file_size_mb = 300;
  return c;
}

// Limits unlike the defaults in every field, so a field read from the wrong place shows.
config::Limits RequestLimits() {
  config::Limits l;
  l.wall_time_s = 7;
  l.cpu_time_s = 5;
  l.memory_mb = 321;
  l.processes = 17;
  l.output_bytes = 4096;
  l.file_size_mb = 3;
  l.disk_mb = 45;
  return l;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(SandboxSpecs)

BOOST_AUTO_TEST_CASE(every_use_gets_the_same_cgroup_memory_and_pids_for_the_same_limits) {
  const config::Config config = TestConfig();
  const config::Limits limits = RequestLimits();
  for (SandboxUse use : kEveryUse) {
    BOOST_TEST_CONTEXT("use " << static_cast<int>(use)) {
      const sandbox::CgroupLimits cg = run::CgroupLimitsFor(config, limits, use);
      BOOST_TEST(cg.memory_bytes == 321ull << 20);
      BOOST_TEST(cg.processes == 17);
      const sandbox::SandboxLimits sl = run::SandboxLimitsFor(config, limits, use);
      BOOST_TEST(sl.cgroup.memory_bytes == 321ull << 20);
      BOOST_TEST(sl.cgroup.processes == 17);
      // The cgroup's numbers are the sandbox's own, whatever the use.
      const sandbox::CgroupLimits of_spec = sl.cgroup;
      BOOST_TEST(of_spec.memory_bytes == cg.memory_bytes);
      BOOST_TEST(of_spec.processes == cg.processes);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_step_takes_every_limit_from_the_request) {
  const sandbox::SandboxLimits sl =
      run::SandboxLimitsFor(TestConfig(), RequestLimits(), SandboxUse::kStep);
  BOOST_TEST(sl.wall_time_ms == 7000);
  BOOST_TEST(sl.cpu_time_s == 5);
  BOOST_TEST(sl.output_bytes == 4096u);
  BOOST_TEST(sl.file_size_bytes == 3ull << 20);
  BOOST_TEST(sl.disk_bytes == 45ull << 20);
  BOOST_TEST(sl.open_files == 256);
}

BOOST_AUTO_TEST_CASE(an_install_step_takes_the_install_budget_for_time_and_size) {
  const sandbox::SandboxLimits sl =
      run::SandboxLimitsFor(TestConfig(), RequestLimits(), SandboxUse::kInstallStep);
  BOOST_TEST(sl.wall_time_ms == 333000);
  BOOST_TEST(sl.cpu_time_s == 333);
  BOOST_TEST(sl.file_size_bytes == 777ull << 20);
  BOOST_TEST(sl.disk_bytes == 777ull << 20);
  BOOST_TEST(sl.output_bytes == 4096u);
}

BOOST_AUTO_TEST_CASE(a_warm_sandbox_starts_with_its_rlimits_at_the_ceilings) {
  const sandbox::SandboxLimits sl =
      run::SandboxLimitsFor(TestConfig(), RequestLimits(), SandboxUse::kWarm);
  BOOST_TEST(sl.cpu_time_s == 120);
  BOOST_TEST(sl.file_size_bytes == 300ull << 20);
  BOOST_TEST(sl.disk_bytes == 45ull << 20);
  BOOST_TEST(sl.wall_time_ms == 7000);
}

BOOST_AUTO_TEST_CASE(a_kernel_is_bounded_for_life_by_size_and_its_cgroup_freezes) {
  const config::Config config = TestConfig();
  const sandbox::SandboxLimits sl =
      run::SandboxLimitsFor(config, RequestLimits(), SandboxUse::kKernel);
  BOOST_TEST(sl.file_size_bytes == 3ull << 20);
  BOOST_TEST(sl.disk_bytes == 45ull << 20);
  BOOST_TEST(sl.output_bytes == run::kKernelStartOutputBytes);
  BOOST_TEST(sl.cpu_time_s > int64_t{1} << 20);  // per cell, from the cgroup, not RLIMIT_CPU
  BOOST_TEST(run::CgroupLimitsFor(config, RequestLimits(), SandboxUse::kKernel).freezable);
  BOOST_TEST(!run::CgroupLimitsFor(config, RequestLimits(), SandboxUse::kStep).freezable);
}

BOOST_AUTO_TEST_CASE(an_environment_build_has_its_own_time_output_and_disk) {
  const sandbox::SandboxLimits sl =
      run::SandboxLimitsFor(TestConfig(), RequestLimits(), SandboxUse::kEnvironmentBuild);
  BOOST_TEST(sl.wall_time_ms == 999000);
  BOOST_TEST(sl.cpu_time_s == 999);
  BOOST_TEST(sl.output_bytes == run::kEnvironmentBuildOutputBytes);
  BOOST_TEST(sl.file_size_bytes == 777ull << 20);
  BOOST_TEST(sl.disk_bytes == 777ull << 20);
}

BOOST_AUTO_TEST_CASE(the_base_spec_carries_ids_run_id_and_network) {
  const config::Config config = TestConfig();
  for (bool network : {false, true}) {
    const sandbox::SandboxSpec spec =
        run::BaseSpec(config, RequestLimits(), SandboxUse::kStep, "r-1", network);
    BOOST_TEST(spec.host_uid == 64123u);
    BOOST_TEST(spec.host_gid == 64124u);
    BOOST_TEST(spec.run_id == "r-1");
    BOOST_TEST(spec.network.enabled == network);
    BOOST_TEST(spec.network.allow_cidrs == config.network_allow_cidrs,
               boost::test_tools::per_element());
    BOOST_TEST(spec.limits.cgroup.memory_bytes == 321ull << 20);
  }
}

BOOST_AUTO_TEST_SUITE_END()

// pip building an environment runs in the sandbox's environment (SandboxEnv: locale, home,
// time zone, the admin's index), with only what a `--target` build needs changed.
BOOST_AUTO_TEST_CASE(an_environment_build_runs_in_the_sandbox_environment) {
  config::Config c = TestConfig();
  c.timezone = "Europe/Paris";
  c.pip_index_url = "https://pypi.example/simple";
  const std::vector<std::string> sandbox = run::SandboxEnv(c);
  const std::vector<std::string> build = run::EnvironmentBuildEnv(c);
  auto has = [](const std::vector<std::string>& env, const std::string& line) {
    return std::find(env.begin(), env.end(), line) != env.end();
  };
  for (const char* line : {"HOME=/home/user", "LANG=C.UTF-8", "TZ=Europe/Paris",
                           "PIP_INDEX_URL=https://pypi.example/simple",
                           "PIP_BREAK_SYSTEM_PACKAGES=1", "PYTHONUNBUFFERED=1"}) {
    BOOST_TEST(has(sandbox, line), line);
    BOOST_TEST(has(build, line), line);
  }
  BOOST_TEST(has(build, "PATH=/usr/local/bin:/usr/bin:/bin"));
  BOOST_TEST(has(build, "PIP_TIMEOUT=15"));
  for (const auto& line : build) {
    const std::string key = line.substr(0, line.find('='));
    // pip's config file asks for user installs, which --target refuses.
    BOOST_TEST((key != "PIP_CONFIG_FILE" && key != "PYTHONPATH" && key != "PIP_RETRIES"), line);
  }
}
