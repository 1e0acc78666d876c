"""A warm Python sandbox of the pool: started ahead of its run, it waits.

    python3 /home/user/.sandrun/python/sandrun_warm.py

The interpreter, site, sitecustomize and the loader (sandrun_loader) are loaded while the sandbox
waits in the pool; it then writes one byte, ASCII ACK, on stdout (the daemon reads it: the
sandbox is ready). The daemon then sends one start line on stdin,

    <cpu_time_s> <file_size_bytes> <program path>\\n

and whatever the run's stdin holds after it. This lowers RLIMIT_CPU and RLIMIT_FSIZE to the
run's limits (the pool started them at the ceilings; nothing of the user's has run yet) and
runs the program exactly as `python3 sandrun_main.py PROGRAM` does: __main__, sys.argv,
sys.path[0], __file__, tracebacks and exit code. The line is read one byte at a time, so not a
byte of the program's own stdin is taken from it (a child process it starts reads the rest).
One sandbox, one run: the process exits when the program ends.
"""

import importlib
import os
import resource
import sys

import sandrun_loader


def _start_line():
    line = bytearray()
    while True:
        byte = os.read(0, 1)
        if not byte:
            raise SystemExit(0)  # the pool let it go unused
        if byte == b"\n":
            return line.decode("utf-8")
        line += byte
        if len(line) > 4096:
            raise SystemExit("sandrun: start line too long")


def _main():
    sandrun_loader.warm_up()
    os.write(1, b"\x06")  # ready (ASCII ACK): the daemon reads it; never part of the output
    cpu, fsize, path = _start_line().split(" ", 2)
    cpu, fsize = int(cpu), int(fsize)
    # SIGXCPU at the soft limit, SIGKILL a second later, as the cold start sets them.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    # The run's files were written after this process started: forget what the import system
    # cached of the workspace's directories while it waited.
    importlib.invalidate_caches()
    sandrun_loader.run([path])


if __name__ == "__main__":
    _main()
