// The daemon's heap under load. glibc malloc gives every thread that
// contends for an arena a new one (up to 8 × CPUs) and keeps freed pages inside each arena,
// so a few runs with 1 MiB of output on 8 worker threads left the RSS at 140 MB. Not safe
// after fork (calls malloc internals).
#pragma once

#include <cstddef>

namespace sandrun::util {

// Call once at start-up, before threads: caps malloc at `arenas` arenas (M_ARENA_MAX) and
// fixes the mmap threshold at kMmapThresholdBytes (M_MMAP_THRESHOLD: a block that large is
// its own mapping, returned to the kernel when freed), unless the environment sets
// MALLOC_ARENA_MAX / MALLOC_MMAP_THRESHOLD_ (the operator's choice wins). mallopt(3).
constexpr size_t kMmapThresholdBytes = 128 * 1024;
void TuneMalloc(int arenas);

// Call on a worker thread after a request is answered and its buffers freed: when `bytes`
// (the request's and response's bodies) reach kLargeRequestBytes, returns the free pages of
// every arena to the kernel (malloc_trim). Costs well under a millisecond for a small heap;
// the client already has its response.
constexpr size_t kLargeRequestBytes = 256 * 1024;
void AfterLargeRequest(size_t bytes);

}  // namespace sandrun::util
