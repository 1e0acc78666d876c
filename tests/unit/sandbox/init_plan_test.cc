// The pure seams of the launcher: the InitPlan encoding sandrun-init reads, and the outcome
// precedence. No root needed.
#define BOOST_TEST_MODULE init_plan
#include "sandbox/init_plan.h"

#include <signal.h>
#include <sys/wait.h>

#include <boost/test/unit_test.hpp>

#include "sandbox/launcher.h"

namespace sandbox = sandrun::sandbox;
using sandbox::RunOutcome;

BOOST_AUTO_TEST_SUITE(InitPlan)

BOOST_AUTO_TEST_CASE(round_trips_every_field) {
  sandbox::InitPlan plan;
  plan.oom_score_adj = 777;
  plan.workdir = "/home/user";
  plan.program = "/usr/bin/python3";
  plan.argv = {"/usr/bin/python3", std::string("a\0b", 3)};
  plan.envp = {"HOME=/home/user"};
  plan.rlimits = {{RLIMIT_CPU, 3, 4}};
  plan.seccomp = {{0x20, 1, 2, 0xdeadbeef}};
  plan.user_sysctls = {{"max_inotify_instances", "32"}};
  auto decoded = sandbox::DecodeInitPlan(sandbox::EncodeInitPlan(plan));
  BOOST_TEST_REQUIRE(decoded.ok());
  BOOST_TEST(decoded->oom_score_adj == 777);
  BOOST_TEST(decoded->argv == plan.argv);
  BOOST_TEST(decoded->envp == plan.envp);
  BOOST_TEST(decoded->rlimits.at(0).hard == 4u);
  BOOST_TEST(decoded->seccomp.at(0).k == 0xdeadbeefu);
  BOOST_TEST(decoded->seccomp.at(0).jf == 2);
  BOOST_TEST(decoded->user_sysctls.at(0).second == "32");
}

BOOST_AUTO_TEST_CASE(refuses_truncated_or_foreign_bytes) {
  sandbox::InitPlan plan;
  plan.program = "/bin/true";
  plan.argv = {"/bin/true"};
  const std::string bytes = sandbox::EncodeInitPlan(plan);
  for (size_t cut : {size_t{0}, size_t{5}, bytes.size() - 1}) {
    BOOST_TEST(!sandbox::DecodeInitPlan(bytes.substr(0, cut)).ok(), "cut at " << cut);
  }
  BOOST_TEST(!sandbox::DecodeInitPlan(bytes + "x").ok());
  BOOST_TEST(!sandbox::DecodeInitPlan("not a plan at all").ok());
}

// The zygote's request (zygote.h): mount steps with and without source and data, data with
// a NUL inside (a file's content), flags of 64 bits.
BOOST_AUTO_TEST_CASE(a_zygote_request_round_trips) {
  sandbox::ZygoteRequest in;
  in.owner_uid = 64000;
  in.new_net = false;
  in.root_dir = "/state/.root-template";
  in.put_old = "/state/.root-template/.oldroot";
  in.hostname = "sandbox";
  sandbox::ZygoteRequest::Step mkdir_step;
  mkdir_step.op = 0;
  mkdir_step.target = "/a";
  sandbox::ZygoteRequest::Step file_step;
  file_step.op = 2;
  file_step.has_source = true;
  file_step.source = "src";
  file_step.has_data = true;
  file_step.data = std::string("a\0b", 3);
  file_step.target = "/b";
  file_step.flags = 1ull << 40;
  in.steps = {mkdir_step, file_step};
  auto out = sandbox::DecodeZygoteRequest(sandbox::EncodeZygoteRequest(in));
  BOOST_TEST_REQUIRE(out.ok());
  BOOST_TEST(out->owner_uid == 64000u);
  BOOST_TEST(!out->new_net);
  BOOST_TEST(out->root_dir == in.root_dir);
  BOOST_TEST(out->put_old == in.put_old);
  BOOST_TEST(out->hostname == "sandbox");
  BOOST_TEST_REQUIRE(out->steps.size() == 2u);
  BOOST_TEST(!out->steps[0].has_source);
  BOOST_TEST(!out->steps[0].has_data);
  BOOST_TEST(out->steps[0].target == "/a");
  BOOST_TEST(out->steps[1].has_source);
  BOOST_TEST(out->steps[1].data == std::string("a\0b", 3));
  BOOST_TEST(out->steps[1].flags == (1ull << 40));
  const std::string bytes = sandbox::EncodeZygoteRequest(in);
  BOOST_TEST(!sandbox::DecodeZygoteRequest(bytes.substr(0, bytes.size() - 1)).ok());
  BOOST_TEST(!sandbox::DecodeZygoteRequest(sandbox::EncodeInitPlan({})).ok());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(ClassifyOutcome)

sandbox::RunFacts Exited(int code) {
  sandbox::RunFacts f;
  f.have_report = true;
  f.wait_status = code << 8;  // W_EXITCODE(code, 0)
  f.cpu_limit_ms = 1000;
  return f;
}

BOOST_AUTO_TEST_CASE(our_stops_come_before_the_oom_kill_and_the_program_status) {
  sandbox::RunFacts f = Exited(0);
  f.oom_kills = 1;
  BOOST_TEST(sandbox::ClassifyOutcome(f) == RunOutcome::kMemoryLimit);
  f.cpu_out = true;
  BOOST_TEST(sandbox::ClassifyOutcome(f) == RunOutcome::kCpuTimeout);
  f.timed_out = true;
  BOOST_TEST(sandbox::ClassifyOutcome(f) == RunOutcome::kWallTimeout);
  f.flooded = true;
  BOOST_TEST(sandbox::ClassifyOutcome(f) == RunOutcome::kOutputLimit);
}

BOOST_AUTO_TEST_CASE(program_status_and_missing_report) {
  BOOST_TEST(sandbox::ClassifyOutcome(Exited(3)) == RunOutcome::kExited);
  sandbox::RunFacts f = Exited(0);
  f.have_report = false;
  BOOST_TEST(sandbox::ClassifyOutcome(f) == RunOutcome::kSignaled);
  f = Exited(0);
  f.wait_status = SIGXCPU;
  BOOST_TEST(sandbox::ClassifyOutcome(f) == RunOutcome::kCpuTimeout);
  f.wait_status = SIGKILL;
  f.cpu_ms = 10;
  BOOST_TEST(sandbox::ClassifyOutcome(f) == RunOutcome::kSignaled);
  f.cpu_ms = 1000;
  BOOST_TEST(sandbox::ClassifyOutcome(f) == RunOutcome::kCpuTimeout);
}

BOOST_AUTO_TEST_SUITE_END()
