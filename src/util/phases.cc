#include "util/phases.h"

#include <time.h>

namespace sandrun::util {
namespace {

struct PhaseSet {
  int64_t zero_ns = -1;  // -1: never reset on this thread
  size_t count = 0;
  PhaseStamp stamps[kMaxPhases];
};

thread_local PhaseSet t_phases;

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

void ResetPhases() {
  t_phases.zero_ns = NowNs();
  t_phases.count = 0;
}

void StampPhase(const char* name) {
  PhaseSet& set = t_phases;
  if (set.zero_ns < 0 || set.count == kMaxPhases) return;
  set.stamps[set.count++] = {name, (NowNs() - set.zero_ns) / 1000};
}

const PhaseStamp* Phases(size_t* count) {
  *count = t_phases.count;
  return t_phases.stamps;
}

}  // namespace sandrun::util
