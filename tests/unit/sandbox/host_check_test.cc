#define BOOST_TEST_MODULE host_check
#include "sandbox/host_check.h"

#include <boost/test/unit_test.hpp>
#include <cerrno>

using namespace sandrun::sandbox;

namespace {

// A host where everything is in order.
HostFacts GoodHost() {
  HostFacts f;
  f.is_root = true;
  f.max_user_namespaces = 15000;
  f.seccomp = true;
  f.tmpfs = true;
  f.cgroup_version = "v1";
  f.nginx_version_output =
      "nginx version: nginx/1.22.1\\nconfigure arguments: "
      "--with-http_secure_link_module --with-http_ssl_module";
  return f;
}

bool Mentions(const std::vector<HostProblem>& problems, const std::string& needle) {
  for (const auto& p : problems) {
    if (p.what.find(needle) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(HostCheck)

BOOST_AUTO_TEST_CASE(good_host_has_no_problem) {
  BOOST_TEST(CheckHost(GoodHost(), true).empty());
  BOOST_TEST(WeakerLimits(GoodHost()).empty());
}

BOOST_AUTO_TEST_CASE(disabled_user_namespaces_are_named_with_the_sysctl_fix) {
  HostFacts f = GoodHost();
  f.max_user_namespaces = 0;
  auto problems = CheckHost(f, true);
  BOOST_TEST_REQUIRE(problems.size() == 1u);
  BOOST_TEST(problems[0].fix.find("user.max_user_namespaces") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(debian_and_ubuntu_userns_knobs_matter_only_without_root) {
  HostFacts f = GoodHost();
  f.unprivileged_userns_clone = 0;
  f.apparmor_restrict_userns = 1;
  BOOST_TEST(CheckHost(f, true).empty());
  f.is_root = false;
  auto problems = CheckHost(f, true);
  BOOST_TEST(Mentions(problems, "not running as root"));
  BOOST_TEST(Mentions(problems, "unprivileged_userns_clone"));
  BOOST_TEST(Mentions(problems, "AppArmor"));
}

BOOST_AUTO_TEST_CASE(missing_cgroups_is_a_problem_or_weaker_limits) {
  HostFacts f = GoodHost();
  f.cgroup_version = "";
  f.cgroup_error = "cgroup v1: no pids hierarchy at /sys/fs/cgroup/pids";
  auto problems = CheckHost(f, true);
  BOOST_TEST_REQUIRE(problems.size() == 1u);
  BOOST_TEST(problems[0].what.find("no pids hierarchy") != std::string::npos);
  BOOST_TEST(problems[0].fix.find("require_cgroups: false") != std::string::npos);
  BOOST_TEST(CheckHost(f, false).empty());
  BOOST_TEST(WeakerLimits(f).size() == 4u);
}

BOOST_AUTO_TEST_CASE(cgroups_are_unavailable_without_a_hierarchy_or_without_root) {
  HostFacts f = GoodHost();
  BOOST_TEST(!CgroupsUnavailable(CheckHost(f, true)));
  f.cgroup_version = "";
  f.cgroup_error = "no cgroup";
  BOOST_TEST(CgroupsUnavailable(CheckHost(f, true)));
  BOOST_TEST(!CgroupsUnavailable(CheckHost(f, false)));  // weaker limits instead
  f = GoodHost();
  f.is_root = false;
  BOOST_TEST(CgroupsUnavailable(CheckHost(f, true)));
  f = GoodHost();
  f.seccomp = false;
  f.nginx_version_output = "";
  auto problems = CheckHost(f, true);
  BOOST_TEST(problems.size() == 2u);
  BOOST_TEST(!CgroupsUnavailable(problems));
}

BOOST_AUTO_TEST_CASE(no_seccomp_or_tmpfs_are_named) {
  HostFacts f = GoodHost();
  f.seccomp = false;
  f.tmpfs = false;
  auto problems = CheckHost(f, true);
  BOOST_TEST(Mentions(problems, "seccomp"));
  BOOST_TEST(Mentions(problems, "tmpfs"));
}

BOOST_AUTO_TEST_CASE(nginx_without_secure_link_is_named) {
  HostFacts f = GoodHost();
  f.nginx_version_output =
      "nginx version: nginx/1.22.1\\nconfigure arguments: --with-http_ssl_module";
  BOOST_TEST(Mentions(CheckHost(f, true), "secure_link"));
  f.nginx_version_output = "";
  BOOST_TEST(Mentions(CheckHost(f, true), "nginx is not installed"));
  f.check_nginx = false;
  BOOST_TEST(CheckHost(f, true).empty());
}

// The trial of the sandbox's namespaces failed: every known cause gets its own line and fix.
HostFacts RefusedTrial(int err) {
  HostFacts f = GoodHost();
  f.userns_errno = err;
  f.userns_error =
      "unshare(CLONE_NEWUSER|...) as uid 64000: " +
      std::string(err == ENOSPC ? "No space left on device" : "Operation not permitted");
  return f;
}

// The one problem of `problems` (a copy: the vector is usually a temporary).
HostProblem OnlyProblem(const std::vector<HostProblem>& problems) {
  BOOST_TEST_REQUIRE(problems.size() == 1u);
  return problems[0];
}

BOOST_AUTO_TEST_CASE(refused_namespaces_in_a_chroot_say_so_with_the_fix) {
  HostFacts f = RefusedTrial(EPERM);
  f.in_chroot = true;
  HostProblem p = OnlyProblem(CheckHost(f, true));
  BOOST_TEST(
      p.what ==
      "the kernel refused the sandbox's namespaces: unshare(CLONE_NEWUSER|...) as uid 64000: "
      "Operation not permitted (sandrund runs in a chroot: the kernel makes no user "
      "namespace there)");
  BOOST_TEST(p.fix == "run sandrun outside the chroot: on the machine itself or in a VM");
  BOOST_TEST((p.facility == HostFacility::kUserNamespaces));
}

BOOST_AUTO_TEST_CASE(refused_namespaces_in_a_container_without_the_capability) {
  HostFacts f = RefusedTrial(EPERM);
  f.cap_sys_admin = false;
  f.container = "docker";
  HostProblem p = OnlyProblem(CheckHost(f, true));
  BOOST_TEST(p.what ==
             "sandrund runs as root without CAP_SYS_ADMIN (in a docker container): it cannot "
             "mount the sandboxes' filesystems, make their namespaces or manage cgroups");
  BOOST_TEST(p.fix.find("docker run --privileged") != std::string::npos);
  // The capability missing is a problem even when the namespaces could be made.
  f.userns_error = "";
  BOOST_TEST(OnlyProblem(CheckHost(f, true)).what.find("without CAP_SYS_ADMIN") !=
             std::string::npos);
  f.userns_error = "unshare(CLONE_NEWUSER|...) as uid 64000: Operation not permitted";
  // A container whose policy refuses them although the capability is there.
  f.cap_sys_admin = true;
  p = OnlyProblem(CheckHost(f, true));
  BOOST_TEST(p.what.find("(in a docker container)") != std::string::npos);
  BOOST_TEST(p.fix.find("seccomp or AppArmor policy") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(refused_namespaces_by_the_sysctls_name_the_sysctl) {
  HostFacts f = RefusedTrial(ENOSPC);
  BOOST_TEST(OnlyProblem(CheckHost(f, true)).fix.find("user.max_user_namespaces=15000") !=
             std::string::npos);
  f = RefusedTrial(EPERM);
  f.unprivileged_userns_clone = 0;
  BOOST_TEST(OnlyProblem(CheckHost(f, true)).fix ==
             "sysctl -w kernel.unprivileged_userns_clone=1 (and persist it in /etc/sysctl.d/)");
  f = RefusedTrial(EPERM);
  f.apparmor_restrict_userns = 1;
  BOOST_TEST(OnlyProblem(CheckHost(f, true)).fix.find("apparmor_restrict_unprivileged_userns=0") !=
             std::string::npos);
  // max_user_namespaces = 0 is named once, by its own line.
  f = RefusedTrial(ENOSPC);
  f.max_user_namespaces = 0;
  BOOST_TEST(OnlyProblem(CheckHost(f, true)).what ==
             "user namespaces are disabled (user.max_user_namespaces = 0)");
}

BOOST_AUTO_TEST_CASE(refused_namespaces_for_an_unknown_reason_still_get_a_fix_line) {
  HostProblem p = OnlyProblem(CheckHost(RefusedTrial(EPERM), true));
  BOOST_TEST(p.what.find("Operation not permitted") != std::string::npos);
  BOOST_TEST(p.fix.find("not in a chroot") != std::string::npos);
  BOOST_TEST(p.fix.find("kernel.unprivileged_userns_clone") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(reads_facts_from_a_fake_proc) {
  char tmpl[] = "/tmp/sandrun-proc-XXXXXX";
  std::string proc = mkdtemp(tmpl);
  std::system(("mkdir -p " + proc + "/sys/user " + proc + "/sys/kernel " + proc + "/self").c_str());
  std::system(("echo 0 > " + proc + "/sys/user/max_user_namespaces").c_str());
  std::system(("echo 1 > " + proc + "/sys/kernel/apparmor_restrict_unprivileged_userns").c_str());
  std::system(("printf 'Name:\\tx\\nSeccomp:\\t0\\n' > " + proc + "/self/status").c_str());
  std::system(("printf 'nodev\\ttmpfs\\n' > " + proc + "/filesystems").c_str());
  HostFacts f = ReadHostFacts(proc, proc);
  // CapEff lacks bit 21 (Docker's default set), and pid 1's environment names its container.
  std::system(("mkdir -p " + proc + "/1").c_str());
  std::system(
      ("printf 'Seccomp:\\t0\\nCapEff:\\t00000000a80425fb\\n' > " + proc + "/self/status").c_str());
  std::system(("printf 'PATH=/bin\\0container=podman\\0' > " + proc + "/1/environ").c_str());
  HostFacts g = ReadHostFacts(proc, proc);
  std::system(("rm -rf " + proc).c_str());
  BOOST_TEST(f.cap_sys_admin);  // no CapEff line: not judged
  BOOST_TEST(f.container == "");
  BOOST_TEST(!g.cap_sys_admin);
  BOOST_TEST(g.container == "podman");
  BOOST_TEST(f.max_user_namespaces == 0);
  BOOST_TEST(f.apparmor_restrict_userns == 1);
  BOOST_TEST(f.unprivileged_userns_clone == -1);
  BOOST_TEST(f.seccomp);
  BOOST_TEST(f.tmpfs);
}

BOOST_AUTO_TEST_SUITE_END()
