// SPDX-License-Identifier: GPL-2.0
// A per-sandbox cap on live inet sockets (DESIGN.md "socket cap"). Attached to the daemon's
// sandbox subtree of the cgroup2 hierarchy; each sandbox's cgroup id maps to its slot in
// `slots` (a sandbox whose cgroup is made anew under another name keeps its slot), each slot
// has a cap in `caps` (written by the daemon before the sandbox's first process runs) and a
// count in `live`. A socket(2) past the cap is refused (EPERM). A connected TCP socket counts until
// it is both closed by the program and in TCP_CLOSE (an orphan the program closed still holds
// buffers; a reset one the program holds keeps its receive queue), an accepted one from the
// end of its handshake; every other socket until the program closes it.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define TCP_CLOSE 7

char LICENSE[] SEC("license") = "GPL";

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u64);    // a sandbox's cgroup id
  __type(value, __u64);  // its slot
} slots SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u64);    // the sandbox's slot
  __type(value, __s64);  // its cap
} caps SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u64);    // the sandbox's slot
  __type(value, __s64);  // its live sockets
} live SEC(".maps");

// Which sandbox a socket counts against. BPF_F_CLONE: an accepted socket starts with a copy
// of its listener's, so the handshake's end knows the sandbox (softirq has no "current").
#define RELEASED 1u  // the program closed it (sock_release)
#define CLOSED 2u    // TCP_CLOSE

struct mark {
  __u64 slot;
  __u32 counted;      // 1 while the socket counts in `live`
  __u32 until_close;  // connected TCP: counted until RELEASED and CLOSED, not RELEASED alone
  __u32 ends;         // RELEASED | CLOSED, as they happen
  __u32 pad;
};
struct {
  __uint(type, BPF_MAP_TYPE_SK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC | BPF_F_CLONE);
  __type(key, int);
  __type(value, struct mark);
} marks SEC(".maps");

static __always_inline void Uncount(struct mark* m);

// Records `end`; the socket stops counting once it has both.
static __always_inline void Ended(struct mark* m, __u32 end) {
  __u32 before = __sync_fetch_and_or(&m->ends, end);
  if (((before | end) & (RELEASED | CLOSED)) == (RELEASED | CLOSED)) Uncount(m);
}

static __always_inline void Uncount(struct mark* m) {
  if (__sync_lock_test_and_set(&m->counted, 0) == 0) return;  // counted off once
  __s64* n = bpf_map_lookup_elem(&live, &m->slot);
  if (n) __sync_fetch_and_add(n, -1);
}

SEC("cgroup/sock_create")
int sock_create(struct bpf_sock* sk) {
  __u64 id = bpf_get_current_cgroup_id();
  __u64* found = bpf_map_lookup_elem(&slots, &id);
  if (!found) return 0;  // a sandbox the daemon did not register: refused
  __u64 slot = *found;
  __s64* cap = bpf_map_lookup_elem(&caps, &slot);
  __s64* n = bpf_map_lookup_elem(&live, &slot);
  if (!cap || !n) return 0;
  if (__sync_fetch_and_add(n, 1) >= *cap) {
    __sync_fetch_and_add(n, -1);
    return 0;
  }
  struct mark* m = bpf_sk_storage_get(&marks, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
  if (!m) {
    __sync_fetch_and_add(n, -1);
    return 0;
  }
  m->slot = slot;
  m->until_close = 0;
  m->ends = 0;
  m->counted = 1;
  return 1;
}

SEC("cgroup/sock_release")
int sock_release(struct bpf_sock* sk) {
  struct mark* m = bpf_sk_storage_get(&marks, sk, 0, 0);
  if (!m) return 1;
  if (m->until_close) {
    Ended(m, RELEASED);
  } else {
    Uncount(m);
  }
  return 1;
}

SEC("sockops")
int sock_ops(struct bpf_sock_ops* ops) {
  struct bpf_sock* sk = ops->sk;
  if (!sk) return 1;
  struct mark* m = bpf_sk_storage_get(&marks, sk, 0, 0);
  if (!m) return 1;
  switch (ops->op) {
    case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB: {
      // The listener's mark, copied: this socket counts from now on, past the cap if need
      // be (a handshake cannot be refused here; its connecting end was counted).
      __s64* n = bpf_map_lookup_elem(&live, &m->slot);
      m->counted = 0;
      m->ends = 0;
      if (!n) return 1;
      __sync_fetch_and_add(n, 1);
      m->counted = 1;
      m->until_close = 1;
      bpf_sock_ops_cb_flags_set(ops, ops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_STATE_CB_FLAG);
      return 1;
    }
    case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
      if (!m->counted) return 1;
      m->until_close = 1;
      bpf_sock_ops_cb_flags_set(ops, ops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_STATE_CB_FLAG);
      return 1;
    case BPF_SOCK_OPS_STATE_CB:
      if (ops->args[1] == TCP_CLOSE) Ended(m, CLOSED);
      return 1;
  }
  return 1;
}
