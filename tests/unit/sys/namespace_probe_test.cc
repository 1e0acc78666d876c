// sys/namespace_probe.h on this host, as root (the tests run as root, as the daemon does): the
// sandbox's namespaces can be made, this process is not in a chroot, and a refusal carries the
// kernel's errno. Each trial is a forked child; nothing is left behind.
#define BOOST_TEST_MODULE namespace_probe
#include "sys/namespace_probe.h"

#include <sched.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cerrno>

namespace sys = sandrun::sys;

BOOST_AUTO_TEST_SUITE(NamespaceProbe)

BOOST_AUTO_TEST_CASE(the_sandboxs_namespaces_can_be_made_here_as_the_sandbox_uid) {
  BOOST_TEST_REQUIRE(::geteuid() == 0u);
  const unsigned long flags =
      CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET;
  sandrun::Status made = sys::ProbeNamespaces(64000, flags);
  BOOST_TEST(made.ok(), (made.ok() ? "" : made.error().message));
}

BOOST_AUTO_TEST_CASE(a_refusal_names_the_call_and_keeps_the_errno) {
  // Without CLONE_NEWUSER, an unprivileged uid may not make a mount namespace: EPERM.
  sandrun::Status refused = sys::ProbeNamespaces(64000, CLONE_NEWNS);
  BOOST_TEST_REQUIRE(!refused.ok());
  BOOST_TEST(refused.error().err == EPERM);
  BOOST_TEST(refused.error().message ==
             "unshare(CLONE_NEWUSER|...) as uid 64000: Operation not permitted");
}

BOOST_AUTO_TEST_CASE(this_test_does_not_run_in_a_chroot) {
  auto chroot = sys::InChroot();
  BOOST_TEST_REQUIRE(chroot.ok(), (chroot.ok() ? "" : chroot.error().message));
  BOOST_TEST(!*chroot);
}

BOOST_AUTO_TEST_SUITE_END()
