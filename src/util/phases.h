// Phase stamps of the request a thread is handling: CLOCK_MONOTONIC time points, named by
// static strings, kept in a fixed thread-local array (no allocation, no lock; about 25 ns a
// stamp through the vDSO). The server resets them when a request starts and writes them into
// the request's log line as "phases_us" (util/json_log.h), microseconds since the reset, in
// the order stamped: scripts/bench --profile reads them from there. A phase stamped twice (a
// run of several steps) keeps every stamp. Stamps past kMaxPhases are dropped.
// Not safe after fork in the sense that a child's stamps are its own copy: never stamp there.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sandrun::util {

struct PhaseStamp {
  const char* name;  // a string literal
  int64_t us;        // microseconds since ResetPhases()
};

constexpr size_t kMaxPhases = 48;

// Starts a new set of stamps on this thread (the request's time zero).
void ResetPhases();
// Stamps `name` (a string literal) now. Does nothing before the first ResetPhases().
void StampPhase(const char* name);
// This thread's stamps since the last reset; `*count` receives how many.
const PhaseStamp* Phases(size_t* count);

}  // namespace sandrun::util
