#define BOOST_TEST_MODULE sys_syscalls
#include "sys/syscalls.h"

#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>

#include "sys/signal_free_thread.h"

using sandrun::sys::FirstUnsearchableDir;

BOOST_AUTO_TEST_SUITE(Syscalls)

BOOST_AUTO_TEST_CASE(errno_message_is_the_strerror_text) {
  for (int err : {ENOENT, EACCES, ENOSPC, EINTR, 0, 99999}) {
    BOOST_TEST(sandrun::sys::ErrnoMessage(err) == std::strerror(err), err);
    // The words storage/ used before (std::error_code) are the same words.
    BOOST_TEST(
        sandrun::sys::ErrnoMessage(err) == std::error_code(err, std::generic_category()).message(),
        err);
  }
  BOOST_TEST(sandrun::sys::ErrnoMessage(ENOENT) == "No such file or directory");
}

BOOST_AUTO_TEST_CASE(errno_error_names_the_call_and_keeps_errno) {
  errno = EACCES;
  const sandrun::Error e = sandrun::sys::ErrnoError("open /x");
  BOOST_TEST((e.kind == sandrun::ErrorKind::kSystem));
  BOOST_TEST(e.err == EACCES);
  BOOST_TEST(e.message == "open /x: Permission denied");
}

BOOST_AUTO_TEST_CASE(a_full_file_system_is_a_file_limit) {
  for (int err : {ENOSPC, EDQUOT, EFBIG}) {
    BOOST_TEST((sandrun::sys::WriteErrorKind(err) == sandrun::ErrorKind::kFileLimit), err);
  }
  for (int err : {EIO, EACCES, 0}) {
    BOOST_TEST((sandrun::sys::WriteErrorKind(err) == sandrun::ErrorKind::kSystem), err);
  }
}

BOOST_AUTO_TEST_CASE(names_the_first_directory_others_cannot_search) {
  char tmpl[] = "/tmp/sandrun-sys-XXXXXX";
  const std::string base = ::mkdtemp(tmpl);
  ::chmod(base.c_str(), 0755);
  const std::string closed = base + "/closed";
  BOOST_REQUIRE(::mkdir(closed.c_str(), 0700) == 0);
  BOOST_TEST(FirstUnsearchableDir(base + "/open/runs") == "");  // not existing yet: fine
  const std::string why = FirstUnsearchableDir(closed + "/state/runs");
  BOOST_TEST(why.find(closed + " is not searchable by others (mode 700)") == 0u, why);
  ::chmod(closed.c_str(), 0711);
  BOOST_TEST(FirstUnsearchableDir(closed + "/state/runs") == "");
  std::system(("rm -rf " + base).c_str());
}

BOOST_AUTO_TEST_CASE(tree_removal_does_not_follow_symlinks) {
  char tmpl[] = "/tmp/sandrun-sys-XXXXXX";
  const std::string base = ::mkdtemp(tmpl);
  const std::string outside = base + "/outside";
  const std::string tree = base + "/tree";
  BOOST_REQUIRE(sandrun::sys::MakeDirs(outside + "/keep").ok());
  BOOST_REQUIRE(sandrun::sys::MakeDirs(tree + "/sub").ok());
  BOOST_REQUIRE(::symlink(outside.c_str(), (tree + "/sub/link").c_str()) == 0);
  BOOST_TEST(sandrun::sys::RemoveTree(tree).ok());
  BOOST_TEST(::access(tree.c_str(), F_OK) != 0);
  BOOST_TEST(::access((outside + "/keep").c_str(), F_OK) == 0);
  std::system(("rm -rf " + base).c_str());
}

BOOST_AUTO_TEST_CASE(make_dirs_makes_every_missing_level_with_the_mode) {
  char tmpl[] = "/tmp/sandrun-sys-XXXXXX";
  const std::string base = ::mkdtemp(tmpl);
  ::umask(022);
  BOOST_TEST(sandrun::sys::MakeDirs(base + "/a/b/c", 0700).ok());
  struct stat st {};
  for (const char* level : {"/a", "/a/b", "/a/b/c"}) {
    BOOST_TEST_REQUIRE(::stat((base + level).c_str(), &st) == 0, level);
    BOOST_TEST(S_ISDIR(st.st_mode), level);
    BOOST_TEST((st.st_mode & 0777) == 0700u, level);
  }
  // Already there, a trailing slash, a doubled one: fine. A relative path: from the cwd.
  BOOST_TEST(sandrun::sys::MakeDirs(base + "/a/b/c").ok());
  BOOST_TEST(sandrun::sys::MakeDirs(base + "/a/d/").ok());
  BOOST_TEST(sandrun::sys::MakeDirs(base + "/a//e/f").ok());
  BOOST_TEST(::access((base + "/a/e/f").c_str(), F_OK) == 0);
  // A file in the way: the error names the path that could not be made.
  BOOST_REQUIRE(sandrun::sys::WriteFile(base + "/a/file", "x").ok());
  auto blocked = sandrun::sys::MakeDirs(base + "/a/file/g/h");
  BOOST_TEST_REQUIRE(!blocked.ok());
  BOOST_TEST(blocked.error().err == ENOTDIR);
  BOOST_TEST(blocked.error().message.find("mkdir " + base + "/a/file/g") == 0u,
             blocked.error().message);
  std::system(("rm -rf " + base).c_str());
}

BOOST_AUTO_TEST_CASE(a_file_lock_is_held_by_one_open_file_until_it_closes) {
  char tmpl[] = "/tmp/sandrun-sys-XXXXXX";
  const std::string base = ::mkdtemp(tmpl);
  const std::string path = base + "/x.lock";
  {
    auto first = sandrun::sys::TryLockFile(path);
    BOOST_TEST_REQUIRE(first.ok());
    auto second = sandrun::sys::TryLockFile(path);  // another open file, same process
    BOOST_TEST_REQUIRE(!second.ok());
    BOOST_TEST(second.error().err == EWOULDBLOCK);
    BOOST_TEST(second.error().message.find("flock " + path) == 0u, second.error().message);
  }
  BOOST_TEST(sandrun::sys::TryLockFile(path).ok());
  // Not through a symlink.
  BOOST_REQUIRE(::symlink(path.c_str(), (base + "/link").c_str()) == 0);
  BOOST_TEST(!sandrun::sys::TryLockFile(base + "/link").ok());
  std::system(("rm -rf " + base).c_str());
}

// Callers outside sys/ tell "already there" from a failure by the error's errno.
BOOST_AUTO_TEST_CASE(mkdir_error_carries_errno) {
  char tmpl[] = "/tmp/sandrun-sys-XXXXXX";
  const std::string base = ::mkdtemp(tmpl);
  BOOST_TEST(sandrun::sys::MakeDir(base + "/one").ok());
  auto again = sandrun::sys::MakeDir(base + "/one");
  BOOST_TEST_REQUIRE(!again.ok());
  BOOST_TEST(again.error().err == EEXIST);
  BOOST_TEST(again.error().message.find("mkdir " + base + "/one") == 0u, again.error().message);
  auto missing = sandrun::sys::MakeDir(base + "/no/two");
  BOOST_TEST_REQUIRE(!missing.ok());
  BOOST_TEST(missing.error().err == ENOENT);
  std::system(("rm -rf " + base).c_str());
}

BOOST_AUTO_TEST_CASE(read_returns_bytes_then_zero_at_eof) {
  auto pipe = sandrun::sys::MakePipe();
  BOOST_TEST_REQUIRE(pipe.ok());
  BOOST_TEST_REQUIRE(sandrun::sys::WriteAll(pipe->write.get(), "abc", 3));
  pipe->write.Reset();
  char buf[8];
  auto got = sandrun::sys::Read(pipe->read.get(), buf, sizeof buf);
  BOOST_TEST_REQUIRE(got.ok());
  BOOST_TEST(*got == 3u);
  BOOST_TEST(std::string(buf, 3) == "abc");
  auto eof = sandrun::sys::Read(pipe->read.get(), buf, sizeof buf);
  BOOST_TEST_REQUIRE(eof.ok());
  BOOST_TEST(*eof == 0u);
  auto bad = sandrun::sys::Read(-1, buf, sizeof buf);
  BOOST_TEST_REQUIRE(!bad.ok());
  BOOST_TEST(bad.error().err == EBADF);
}

// Both ends share one inode: the owner seen through either is the new one.
BOOST_AUTO_TEST_CASE(pipe_is_chowned_to_the_sandbox_user) {
  BOOST_TEST_REQUIRE(::geteuid() == 0, "fchown to another uid needs root");
  auto pipe = sandrun::sys::MakePipe();
  BOOST_TEST_REQUIRE(pipe.ok());
  BOOST_TEST_REQUIRE(sandrun::sys::ChownPipe(*pipe, 64123, 64124).ok());
  for (int fd : {pipe->read.get(), pipe->write.get()}) {
    struct stat st;
    BOOST_TEST_REQUIRE(::fstat(fd, &st) == 0);
    BOOST_TEST(st.st_uid == 64123u);
    BOOST_TEST(st.st_gid == 64124u);
  }
}

// The daemon's main thread switches its effective uid for the self-test's sandbox; the
// kernel clears the parent-death signal on that switch, and sandrund outlived a killed
// scripts/serve (integration.Cluster). Tried in a thread of its own: the signal is per thread.
BOOST_AUTO_TEST_CASE(a_thread_keeps_its_parent_death_signal_across_an_euid_switch) {
  BOOST_TEST_REQUIRE(::geteuid() == 0, "setting another effective uid needs root");
  int before = -1, during = -1, after = -1;
  bool switched = false;
  std::thread([&] {
    ::prctl(PR_SET_PDEATHSIG, SIGUSR2, 0, 0, 0);
    ::prctl(PR_GET_PDEATHSIG, &before);
    switched = sandrun::sys::SetThreadEffectiveUid(64125).ok();
    ::prctl(PR_GET_PDEATHSIG, &during);
    switched = sandrun::sys::SetThreadEffectiveUid(0).ok() && switched;
    ::prctl(PR_GET_PDEATHSIG, &after);
    ::prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0);
  }).join();
  BOOST_TEST_REQUIRE(switched);
  BOOST_TEST(before == SIGUSR2);
  BOOST_TEST(during == SIGUSR2);
  BOOST_TEST(after == SIGUSR2);
}

// The daemon's stop signals stay with its sigwait thread: a thread started by a thread that
// blocks nothing (the start-up self-test's, say) still takes none, and the starter's own mask
// is as it was.
BOOST_AUTO_TEST_CASE(a_signal_free_thread_blocks_every_signal_and_leaves_its_starters_mask) {
  std::thread starter([] {
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, nullptr);
    bool term_blocked = false, hup_blocked = false;
    std::thread t = sandrun::sys::StartSignalFreeThread([&] {
      sigset_t mine;
      pthread_sigmask(SIG_SETMASK, nullptr, &mine);
      term_blocked = sigismember(&mine, SIGTERM) == 1;
      hup_blocked = sigismember(&mine, SIGHUP) == 1;
    });
    t.join();
    BOOST_TEST(term_blocked);
    BOOST_TEST(hup_blocked);
    sigset_t after;
    pthread_sigmask(SIG_SETMASK, nullptr, &after);
    BOOST_TEST(sigismember(&after, SIGTERM) == 0, "the starter's mask changed");
  });
  starter.join();
}

// The warm pool's refill gate counts the runs on a CPU from /proc/loadavg (proc(5)).
BOOST_AUTO_TEST_CASE(runnable_tasks_are_read_from_loadavg) {
  using sandrun::sys::RunnableTasksOf;
  BOOST_TEST(RunnableTasksOf("0.15 0.03 0.01 2/123 4567\n") == 2);
  BOOST_TEST(RunnableTasksOf("12.00 8.50 4.25 17/2048 99") == 17);
  for (const char* bad : {"", "0.15 0.03 0.01", "0.15 0.03 0.01 /123 1", "0.1 0.2 0.3 x/12 1",
                          "0.1 0.2 0.3 12 1", "0.1 0.2 0.3 99999999999999999999/1 1"}) {
    BOOST_TEST(RunnableTasksOf(bad) == -1, bad);
  }
  BOOST_TEST(sandrun::sys::RunnableTasks() >= 1, "this test itself is running");
  BOOST_TEST(sandrun::sys::UsableCpus() >= 1);
}

BOOST_AUTO_TEST_SUITE_END()
