#include "util/memory.h"

#include <malloc.h>

#include <cstdlib>

namespace sandrun::util {

void TuneMalloc(int arenas) {
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr && arenas >= 1) {
    (void)mallopt(M_ARENA_MAX, arenas);
  }
  // Setting it fixes it: glibc otherwise raises the threshold to the size of each mapped
  // block freed (up to 32 MiB), after which a run's 1 MiB output buffers come from the
  // arenas and stay there, fragmented, when freed.
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr) {
    (void)mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMmapThresholdBytes));
  }
}

void AfterLargeRequest(size_t bytes) {
  if (bytes >= kLargeRequestBytes) (void)malloc_trim(0);
}

}  // namespace sandrun::util
