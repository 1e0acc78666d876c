// The two directories named ".sandrun", which mean two different things.
// Same spelling, so that one rule keeps a user's files out of both; different names here, so
// that a reader knows which one a line is about.
#pragma once

namespace sandrun::util {

// In a run's workspace: the launcher's program files (each step's main.py, the Python support
// files). Read-only for the program; never exported, saved with a session, nor accepted as an
// input file's path.
inline constexpr char kProgramDir[] = ".sandrun";

// In a published run directory of the artifact store: the store's run record
// (<run>/.sandrun/run, storage/user_store.h). Never a published file's first segment.
inline constexpr char kRunRecordDir[] = ".sandrun";

}  // namespace sandrun::util
