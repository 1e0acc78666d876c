// Integration tests of sandrun through nginx (see stack.h). Run one suite with
//   build/tests/integration/sandrun_integration_test --run_test=RunEndToEnd
// SANDRUN_KEEP_STATE=1 keeps the temporary state directory (config, logs, artifacts).
#define BOOST_TEST_MODULE SandrunIntegration
#include <boost/test/unit_test.hpp>

#include "stack.h"

// The macro pastes its argument into a name, so it needs an unqualified one.
using sandrun::integration::Stack;
BOOST_TEST_GLOBAL_FIXTURE(Stack);
