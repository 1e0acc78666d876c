// A trial of the namespaces a sandbox needs, made before the daemon relies on them (sandrund
// check, and the daemon's start-up host checks).
#pragma once

#include <sys/types.h>

#include "util/result.h"

namespace sandrun::sys {

// Whether this process may make a sandbox's namespaces: a forked child takes `owner` as its
// effective uid (only when this process is root, as the launcher's clone does), unshare(2)s
// `flags` and exits; nothing is left behind. OK when it could; else an Error whose `err` is
// the errno of the refusal (EPERM in a chroot or without CAP_SYS_ADMIN, ENOSPC at
// user.max_user_namespaces) and whose message names the call. Not child-safe.
Status ProbeNamespaces(uid_t owner, unsigned long flags);

// Whether this process runs in a chroot: its root is not the root of its mount namespace. A
// forked child enters its own mount namespace again (setns(2) moves it to that namespace's
// root, as the kernel's chroot test sees it) and compares the mount and inode of "/" with this
// process's; a bind mount of / counts as a chroot, as it does for the kernel. Errors: kSystem
// when it cannot tell (setns needs CAP_SYS_ADMIN and CAP_SYS_CHROOT). Not child-safe.
Result<bool> InChroot();

}  // namespace sandrun::sys
