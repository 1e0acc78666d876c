// What a per-run str hash seed would cost the zygote (DESIGN.md "the zygote"): the CPU of one
// print(1) run, N runs one after another, as
//   B   fork + exec /usr/bin/python3 -c 'print(1)' (a bare start);
//   A   fork of a process holding libpython loaded but not initialised, the child
//       Py_InitializeFromConfig (so a seed of its own) then print(1);
//   A2  as A, with Py_PreInitialize done before the fork;
//   C   fork of a started interpreter, the child print(1) (the zygote: one seed for all).
// Not built by CMake (a measurement, not a part):
//   gcc -O2 -o /tmp/seed zygote_seed_experiment.c $(pkg-config --cflags --libs python3-embed)
//   for m in B A A2 C; do /tmp/seed 100 $m; done
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static void report(const char* name, int n, double wall, struct rusage* ru) {
  double cpu = ru->ru_utime.tv_sec + ru->ru_utime.tv_usec / 1e6 + ru->ru_stime.tv_sec + ru->ru_stime.tv_usec / 1e6;
  fprintf(stderr, "%-40s wall %.2f ms/run  child cpu %.2f ms/run\n", name, wall * 1000 / n, cpu * 1000 / n);
}
static void run_a(void) {
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  wchar_t* argv[] = {L"python3", L"-c", L"print(1)"};
  PyConfig_SetString(&config, &config.program_name, L"/usr/bin/python3");
  PyConfig_SetArgv(&config, 3, argv);
  PyStatus s = Py_InitializeFromConfig(&config);
  if (PyStatus_Exception(s)) Py_ExitStatusException(s);
  _exit(Py_RunMain());
}
int main(int argc, char** argv) {
  int n = atoi(argv[1]);
  const char* mode = argv[2];
  if (strcmp(mode, "C") == 0) {
    Py_Initialize();
    PyRun_SimpleString("import sys, os, site, encodings");
  }
  if (strcmp(mode, "A2") == 0) {
    PyPreConfig pre; PyPreConfig_InitPythonConfig(&pre);
    Py_PreInitialize(&pre);
  }
  struct rusage total = {0};
  double t0 = now();
  for (int i = 0; i < n; ++i) {
    pid_t p = fork();
    if (p == 0) {
      int devnull = open("/dev/null", 1); dup2(devnull, 1);
      if (mode[0] == 'A') run_a();
      if (mode[0] == 'B') { execl("/usr/bin/python3", "python3", "-c", "print(1)", (char*)0); _exit(127); }
      if (mode[0] == 'C') { PyOS_AfterFork_Child(); PyRun_SimpleString("print(1)"); fflush(stdout); _exit(0); }
    }
    int st; struct rusage ru;
    wait4(p, &st, 0, &ru);
    total.ru_utime.tv_sec += ru.ru_utime.tv_sec; total.ru_utime.tv_usec += ru.ru_utime.tv_usec;
    total.ru_stime.tv_sec += ru.ru_stime.tv_sec; total.ru_stime.tv_usec += ru.ru_stime.tv_usec;
  }
  report(mode, n, now() - t0, &total);
  return 0;
}
