#include "util/memory.h"

#include <malloc.h>

#include <cstdlib>

namespace sandrun::util {

void TuneMalloc(int arenas) {
  if (std::getenv("MALLOC_ARENA_MAX") != nullptr) return;
  if (arenas >= 1) (void)mallopt(M_ARENA_MAX, arenas);
}

void AfterLargeRequest(size_t bytes) {
  if (bytes >= kLargeRequestBytes) (void)malloc_trim(0);
}

}  // namespace sandrun::util
