// The kernel zygote (config `kernel_zygote`, on by default): kernels start from a Python with
// ipykernel imported, forked into each new sandbox. Two ctest entries run this suite:
// integration.KernelZygoteCold (kernel_zygote off, SANDRUN_IT_KERNEL_COLD=1) writes what a kernel's
// cell sees of its interpreter and process to SANDRUN_IT_KERNEL_PRINT; integration.KernelZygote
// (the default config) runs the same cells on kernels from the zygote and compares (a ctest fixture
// orders the two). Both stacks have no kernel pool, so each stateful run's kernel is started for
// it.
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "helpers.h"
#include "stack.h"

namespace sandrun::integration {
namespace {

// Which way the kernel started: the zygote imported the loader (a documented difference).
const char kWhichWay[] =
    "import sys\n"
    "print('zygote' if 'sandrun_loader' in sys.modules else 'cold')\n";

// What a cell sees of its interpreter and its process; each printed line is compared.
const std::vector<std::string> kCells = {
    "import sys, os\nprint(__name__, sys.argv[1:], sys.orig_argv[:3], sys.path)\n"
    "print(os.getcwd(), os.getuid(), os.getgid(), os.getgroups(), os.getppid() > 0)\n",
    // PYDEVD_USE_FRAME_EVAL: set by ipykernel's debugger, which a zygote kernel has not.
    "import os\nprint(sorted((k, v) for k, v in os.environ.items() if k != 'JPY_PARENT_PID' "
    "and not k.startswith('PYDEVD_')))\n",
    "import sys\nprint(sys.flags, sys.executable, sys.prefix)\n",
    "import platform, socket\nprint(platform.node(), socket.gethostname(), platform.uname())\n",
    "import resource as r\nprint([r.getrlimit(getattr(r, n)) for n in dir(r) "
    "if n.startswith('RLIMIT_')])\n",
    "import signal\nprint([(s.name, str(signal.getsignal(s))) for s in "
    "signal.valid_signals() if isinstance(s, signal.Signals) and s not in (signal.SIGKILL, "
    "signal.SIGSTOP)])\n",
    "st = open('/proc/self/status').read().splitlines()\n"
    "print([l for l in st if l.split(':')[0] in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', "
    "'CapAmb', 'NoNewPrivs', 'Seccomp', 'SigIgn', 'SigBlk')])\n",
    // The kernel's own fds (zmq's sockets, its event loop, the output pipes), by kind.
    "import os, re\nkinds = []\nfor fd in sorted(os.listdir('/proc/self/fd'), key=int):\n"
    "    try:\n        kinds.append(re.sub(r'[0-9]+', 'N', os.readlink('/proc/self/fd/' + fd)))\n"
    "    except OSError:\n        pass\nprint(sorted(kinds))\n",
    "import IPython, ipykernel\nip = get_ipython()\nprint(type(ip).__name__, "
    "IPython.__version__, ipykernel.__version__, ip.user_ns['__name__'], "
    "__file__ if '__file__' in dir() else '-')\n",
    "import matplotlib\nprint(matplotlib.get_backend(), matplotlib.get_configdir())\n",
    "import jedi, parso.cache\nprint(jedi.settings.cache_directory, "
    "parso.cache._default_cache_path)\n",
    "import IPython.utils.io as u\nprint(u.devnull.closed, u.devnull.name)\n",
    "import tempfile\nprint(tempfile.gettempdir(), tempfile.mkdtemp().rsplit('/', 1)[0])\n",
    "x = 20\nx + 22\n",
    "1/0\n",
};

int session_counter = 0;

// The cold entry's run (SANDRUN_IT_KERNEL_COLD=1, its stack's kernel_zygote false).
bool ColdEntry() {
  const char* cold = std::getenv("SANDRUN_IT_KERNEL_COLD");
  return cold != nullptr && std::string(cold) == "1";
}

// One stateful run of `code` on a new session's kernel: its stdout, with its stderr and
// status after it (a traceback is compared too).
std::string RunOnNewKernel(const std::string& code) {
  const std::string session = "kz-" + std::to_string(++session_counter);
  rapidjson::Document r =
      PostRun(R"({"language": "python", "stateful": true, "session": )" + Q(session) +
              R"(, "code": )" + Q(std::string(kWhichWay) + code) + "}");
  return Str(r, "stdout") + "--- stderr\n" + Str(r, "stderr") + "--- status " + Str(r, "status");
}

std::string Rest(const std::string& s) { return s.substr(s.find('\n') + 1); }

}  // namespace

BOOST_AUTO_TEST_SUITE(KernelZygote)

// What a cell sees is what it sees on a kernel started without the zygote (the cold entry's
// record), but for the listed differences: the zygote kernel has no debugger (debugpy is not
// imported, nor its PYDEVD_ variable set) and sys.modules holds what the zygote imported.
BOOST_AUTO_TEST_CASE(a_zygote_kernel_is_a_cold_one) {
  const char* record = std::getenv("SANDRUN_IT_KERNEL_PRINT");
  BOOST_REQUIRE_MESSAGE(record != nullptr, "SANDRUN_IT_KERNEL_PRINT names the cold record");
  const bool cold = ColdEntry();
  std::vector<std::string> seen;
  for (const auto& code : kCells) {
    const std::string out = RunOnNewKernel(code);
    BOOST_TEST(out.rfind(cold ? "cold\n" : "zygote\n", 0) == 0, out);
    seen.push_back(Rest(out));
  }
  if (cold) {
    std::ofstream file(record, std::ios::trunc | std::ios::binary);
    for (const auto& s : seen) file << s.size() << "\n" << s;
    BOOST_REQUIRE(file.good());
    return;
  }
  std::ifstream file(record, std::ios::binary);
  BOOST_REQUIRE_MESSAGE(file.good(), "the cold entry's record " << record);
  for (size_t i = 0; i < kCells.size(); ++i) {
    size_t size = 0;
    file >> size;
    file.get();
    std::string expected(size, '\0');
    file.read(expected.data(), static_cast<std::streamsize>(size));
    BOOST_TEST(seen[i] == expected, kCells[i]);
  }
}

// Two kernels from the zygote share no random state: neither random's generator (seeded from
// the OS at its import, in the zygote; reseeded at the fork) nor uuid4's; a cold kernel's
// ipykernel has its debugger, a zygote one's has not (no client reaches it: DESIGN.md).
BOOST_AUTO_TEST_CASE(two_zygote_kernels_share_no_random_state) {
  const std::string code =
      "import random, uuid\nprint(random.random())\nprint(random.getrandbits(64))\n"
      "print(uuid.uuid4())\nimport ipykernel.ipkernel as k\nprint(k._is_debugpy_available)\n";
  const std::string a = Rest(RunOnNewKernel(code));
  const std::string b = Rest(RunOnNewKernel(code));
  for (int line = 0; line < 3; ++line) {
    BOOST_TEST(!Line(a, line).empty(), a);
    BOOST_TEST(Line(a, line) != Line(b, line), "line " << line << " of two kernels: " << a);
  }
  BOOST_TEST(Line(a, 3) == (ColdEntry() ? "True" : "False"), a);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace sandrun::integration
