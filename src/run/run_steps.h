// The steps of a stateless run as data: which of the request's steps are
// programs and which are files to write, the budget left for a step, and the SandboxSpec
// of one step. Pure: the run engine (engine.cc) runs what these describe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/config.h"
#include "run/run_request.h"
#include "sandbox/result.h"
#include "sandbox/spec.h"

namespace sandrun::run {

// The sandbox's environment (HOME, PATH, LANG, pip's settings, ...), for runs and kernels.
std::vector<std::string> SandboxEnv(const config::Config& config);

// The request's steps split once: programs to run and files to write (`save_as`: blocks the
// markdown plan saves under a name, run by a later block). Indices into run.steps, in order:
// a program's index names its directory in .sandrun (ProgramPath) and, without a block, its
// `index` in the response, so the split keeps them.
struct StepParts {
  std::vector<size_t> programs;
  std::vector<size_t> files;
};
StepParts PartitionSteps(const std::vector<CodeStep>& steps);

// An install step (pip installs of index requirements, and nothing else: run/install_step.h)
// runs on its own budget (install_wall_time_s, install_disk_mb), not the program's. The
// planner's install steps are held to the same rule: a block that also runs something, or
// installs from a path, a file or a URL, is a program.
bool IsInstallStep(const CodeStep& step);

// The sandbox environment of an install step: SandboxEnv's, with HOME the read-only
// kInstallHome (no pip.conf, ~/.pydistutils.cfg or cache of the workspace), PATH without the
// workspace's ~/.local/bin (a build backend's `cc` is the system's), no PYTHONPATH,
// PYTHONNOUSERSITE=1 (pip's build subprocesses see no user site either), PYTHONUSERBASE the
// workspace's ~/.local (where `pip install --user` puts packages) and no pip cache. Pure.
std::vector<std::string> InstallEnv(const config::Config& config);

// The sandbox environment of pip building a prepared environment (environments.cc):
// SandboxEnv's, with PATH the system's, no PYTHONPATH, no pip config file (it asks for user
// installs, which `--target` refuses), pip's default retries, a 15 s timeout and no progress
// bar, pip compiling bytecode into the environment, and no matplotlib or cache settings. Pure.
std::vector<std::string> EnvironmentBuildEnv(const config::Config& config);

// A kernel cell (%%bash) that runs an install step as RunSteps does: the daemon's script of its
// pure pip installs (ProgramText) under /bin/bash with InstallEnv only.
std::string InstallCell(const config::Config& config, const CodeStep& step);

// What the program file of `step` holds: its code, or for an install step the script that
// runs its pip installs isolated from the workspace (run/install_step.h). Pure.
std::string ProgramText(const CodeStep& step);

// A shell step with a pip install in it, install step or not: when pip finds nothing
// without the network, it gets the network-off note.
bool MentionsInstall(const CodeStep& step);

// Several programs (snippets, markdown) each get their own directory in .sandrun.
bool MultiStep(const RunRequest& run);

// The program file of step `i`, relative to .sandrun: main.py, or <i>/main.py.
std::string ProgramPath(const RunRequest& run, size_t i);

// The `index` of step `i` in the response: its block, or its place among the steps.
int StepIndex(const CodeStep& step, size_t i);

// Where a run's files are on the host (RunDir, run_dir.h).
struct RunPaths {
  std::string workspace;  // /home/user in the sandbox
  std::string tmp;        // /tmp
  std::string outputs;    // the outputs area of shown figures (run_displays.h)
};

// What is left of the run's budget for its next step: wall time (milliseconds) and
// output (bytes of stdout + stderr). An install step has its own wall time.
struct StepBudget {
  int64_t wall_ms = 0;
  uint64_t output_bytes = 0;
};
// `program_ms`: wall time the run's program steps used so far; `output_used`: bytes of
// output of all its steps so far.
StepBudget BudgetLeft(const config::Config& config, const RunRequest& run, const CodeStep& step,
                      int64_t program_ms, uint64_t output_used);
// Why a step cannot start with `budget` ("wall-clock time" or "output"), "" when it can
// (at least 1 ms and 1 KiB left).
std::string BudgetSpent(const StepBudget& budget);

// The sandbox of program step `i` of run `id`: its argv (the language's, with its program
// file), environment, paths, limits (the request's; an install step's time and size limits
// are the install budget's; wall time and output what `budget` has left), network, and the
// request's stdin for StdinStep. Pure.
sandbox::SandboxSpec StepSpec(const config::Config& config, const RunRequest& run, size_t i,
                              const std::string& id, const RunPaths& paths,
                              const StepBudget& budget);

// The step the request's `stdin` goes to: with markdown, the first program step the plan
// sees reading stdin (CodeStep::reads_stdin); else, and when none does, the last step. Pure.
size_t StdinStep(const RunRequest& run);

// One line for a step that waited for input and got none (the request has no `stdin`, or
// it went to another step): "sandrun: the program asked for input (input() on line 4 of
// block 2) and got none: ...". Said when a Python step ended in EOFError, or a step the plan
// sees reading stdin another way (sys.stdin, bash `read`) ran without it; "" otherwise. Pure.
std::string NoInputNote(const RunRequest& run, size_t i, const std::string& step_stderr);

// The status of a step from its sandbox's result (a process limit hit is not counted here).
RunStatus StatusOf(const sandbox::SandboxResult& result);

// A line for stderr saying which limit stopped the run, "" when none did, so neither the
// user nor the model has to guess from a bare SIGKILL.
std::string LimitNote(const sandbox::SandboxResult& result, const config::Limits& limits);

// One program step that ran: its result and what the run's totals take from it.
struct StepRun {
  StepResult step;
  int64_t cpu_ms = 0;
  int64_t max_rss_kb = 0;
  int64_t net_rx_bytes = -1;  // -1 without the network
  int64_t net_tx_bytes = -1;
  uint64_t output_bytes = 0;  // stdout + stderr the program wrote (before our notes)
};

// Step `i` of `run` from what its sandbox reported: status, streams, and the notes on
// stderr (the limit that stopped it, the network-off note of a pip install that found
// nothing without the network, the process limit). Reads the host's site directories for
// the network-off note; otherwise pure.
StepRun DescribeStep(const config::Config& config, const RunRequest& run, size_t i,
                     const sandbox::SandboxResult& result);

// A Python support file's bytecode, built once at start (Engine::PrepareCaches): its file
// name in __pycache__ ("sitecustomize.cpython-311.pyc") and the bytes of an unchecked-hash
// .pyc (PEP 552), which Python loads without comparing it with the source.
struct SupportBytecode {
  std::string name;
  std::string bytes;
};

// Writes the notebook support files (sitecustomize.py, the loaders) into
// `workspace`/.sandrun/python, and `bytecode` into its __pycache__: every run has them, since
// a shell step can start Python too, and so has a sandbox of the warm pool. Errors name the
// file. Not safe after fork.
Status WriteSupportFiles(const std::string& workspace,
                         const std::vector<SupportBytecode>& bytecode);

// Appends a step's (or a stateful cell's) stdout and stderr to the run's, with a header line
// naming `title` first when the run has more than one program (`headers`), and adds its bytes
// of network traffic (`net_rx_bytes` -1: it had no network). Pure.
void JoinStreams(const StepResult& sr, bool headers, const std::string& title, int64_t net_rx_bytes,
                 int64_t net_tx_bytes, RunResponse* response);

// Adds a step that ran to the run's `response`: joined streams (with a header line naming
// `title` when the run has more than one program: `headers`), totals, and the first
// failure's status, exit code and signal. Pure.
void JoinStep(StepRun ran, bool headers, const std::string& title, RunResponse* response);

// Appends `line` to `text` on a line of its own.
void AppendLine(std::string& text, const std::string& line);

// The sandrun: line for a step or cell that left the run's disk full, or "" when it is not.
// `workspace_dir`: the host path of the run's workspace tmpfs (a session's kernel's too);
// full means statvfs(2) gives no byte available (an unreadable one counts as not full). A
// full disk is no limit the daemon enforces (the tmpfs refuses the write with ENOSPC, and the
// program sees it as on any full disk), but the user should learn which limit it was.
std::string DiskFullNote(const RunRequest& run, const std::string& workspace_dir);

// The name of program step `i` of `run` in a traceback, as the user counts it: "block 2"
// (the markdown message's blocks in order, from 1, as the plan counts them), or "snippet 2".
std::string BlockName(const RunRequest& run, size_t i);

// `traceback` with IPython's names of the cells in `blocks` (execution count -> name:
// "Cell In[3], line 4", "Cell In [3]") replaced by theirs ("block 2, line 4", "block 2");
// other cells keep IPython's. Pure.
std::string NameCells(const std::string& traceback, const std::map<int, std::string>& blocks);

// The traceback lines of step `i` of a markdown run (`File "/home/user/.sandrun/<i>/main.py",
// line 3`) name its block as a notebook run's do (`block 2, line 3`); other text unchanged.
std::string NameStepFile(const RunRequest& run, size_t i, const std::string& stderr_text);

}  // namespace sandrun::run
