// The seccomp filter of the sandbox (DESIGN.md §3): compiled once in the parent with
// libseccomp, exported as classic BPF, and loaded last before execve in the child.
#pragma once

#include <linux/filter.h>

#include <vector>

#include "util/result.h"

namespace sandrun::sandbox {

class SeccompFilter {
 public:
  // Builds the filter for the native ABI: refused syscalls answer EPERM (a few ENOSYS), socket
  // families outside the list EAFNOSUPPORT, syscalls newer than the table ENOSYS; every other
  // ABI (i386, x32) kills the process. Errors: kSystem, message names the libseccomp call
  // and rule. Not child-safe.
  static Result<SeccompFilter> Compile();

  // The program to pass to seccomp(SECCOMP_SET_MODE_FILTER); points into this object.
  const sock_fprog* program() const { return &program_; }

  SeccompFilter(SeccompFilter&& other) noexcept;
  SeccompFilter& operator=(SeccompFilter&&) = delete;

 private:
  SeccompFilter() = default;
  std::vector<sock_filter> instructions_;
  sock_fprog program_{};
};

}  // namespace sandrun::sandbox
