#!/usr/bin/env python3
"""Keeps the folder layering of src/ (docs/STYLE.md "Layout", docs/DESIGN.md §1) true.

1. Each folder of src/ includes headers of the folders FLOORS allows it and no other: the
   dependencies point downward. A folder missing from FLOORS fails too (give it a row).
2. In src/api/, the HTTP edge (every file that is not a pipeline phase) includes no header of
   a pipeline phase (API_PHASES), except the includes listed in API_EDGE_EXCEPTIONS: the ones
   that hold until the phases move below the edge (into src/run/). That list may only shrink;
   an exception that no longer occurs is reported too.

Usage: check_layering.py SOURCE_DIR
Prints each offender as "path:line: ..." and exits 1 when there is one, else a summary and 0.
"""

import os
import re
import sys

# The folders a folder of src/ may include from (its own is always allowed). src/main.cc
# wires the libraries together and may include any.
FLOORS = {
    'util': set(),
    'python': set(),
    'sys': {'util'},
    'config': {'sys', 'util'},
    'markdown': {'util'},
    'sandbox': {'sys', 'util'},
    'storage': {'sys', 'util'},
    'kernel': {'python', 'sandbox', 'sys', 'util'},
    # The run engine: below the HTTP edge, above everything the pipeline uses.
    'run': {'config', 'kernel', 'markdown', 'python', 'sandbox', 'storage', 'sys', 'util'},
    'api': {'config', 'kernel', 'markdown', 'python', 'run', 'sandbox', 'storage', 'sys',
            'util'},
    'server': {'api', 'sys', 'util'},
    # The Jupyter server API: an HTTP edge beside server/, on the Service and its kernels.
    'jupyter': {'api', 'config', 'kernel', 'run', 'sys', 'util'},
    # The zygote's CPython module: the sandbox's own child code.
    'zygote': {'sandbox', 'sys', 'util'},
}

# Headers of src/api/ that are pipeline phases (workspace, steps, environments, installs,
# displays, the warm pool), which belong below the edge.
API_PHASES = {
    'display_manifest.h', 'environments.h', 'install_step.h', 'packages.h', 'run_dir.h',
    'run_displays.h', 'run_steps.h', 'warm_pool.h',
}
# Files of src/api/ that are phases themselves (their .h above, and the Service methods that
# run the pipeline); every other file of src/api/ is the edge.
API_PHASE_FILES = {name[:-2] + ext for name in API_PHASES for ext in ('.h', '.cc')} | {
    'markdown_plan.cc', 'prepared_caches.cc', 'run_handler.cc', 'stateful_run.cc',
    'warm_start.cc',
}
# Edge files that still include a phase header, as "file -> header". Only shrinks.
API_EDGE_EXCEPTIONS = {
    'service.h -> display_manifest.h',  # Service holds the display manifest's cache
    'service.h -> run_dir.h',           # Service's phase methods take RunPaths / RunTeardown
    'service.h -> run_steps.h',         # ... and StepRun
    'service.h -> warm_pool.h',         # Service owns the warm pool
    'requirements.cc -> packages.h',    # the request's packages are named as pip names them
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def includes(path):
    """(line number, included path) of each quoted include of `path`."""
    with open(path, encoding='utf-8', errors='replace') as f:
        for number, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield number, m.group(1)


def check_folders(src, offenders):
    checked = 0
    for folder in sorted(os.listdir(src)):
        root = os.path.join(src, folder)
        if not os.path.isdir(root):
            continue
        if folder not in FLOORS:
            offenders.append(f'src/{folder}/: a folder without a row in FLOORS '
                             f'(scripts/lib/check_layering.py): say what it may include')
            continue
        allowed = FLOORS[folder] | {folder}
        for dirpath, _, files in os.walk(root):
            for name in sorted(files):
                if not name.endswith(('.h', '.cc', '.in')):
                    continue
                path = os.path.join(dirpath, name)
                checked += 1
                for number, target in includes(path):
                    top = target.split('/', 1)[0] if '/' in target else None
                    if top is None or top not in FLOORS or top in allowed:
                        continue
                    rel = os.path.relpath(path, os.path.dirname(src))
                    offenders.append(f'{rel}:{number}: src/{folder}/ includes "{target}": '
                                     f'{folder}/ may include only {sorted(allowed)}')
    return checked


def check_api_edge(src, offenders):
    api = os.path.join(src, 'api')
    seen = set()
    if not os.path.isdir(api):
        return
    for name in sorted(os.listdir(api)):
        if not name.endswith(('.h', '.cc')) or name in API_PHASE_FILES:
            continue
        for number, target in includes(os.path.join(api, name)):
            if not target.startswith('api/') or target[4:] not in API_PHASES:
                continue
            edge = f'{name} -> {target[4:]}'
            if edge in API_EDGE_EXCEPTIONS:
                seen.add(edge)
                continue
            offenders.append(f'src/api/{name}:{number}: the HTTP edge includes the pipeline '
                             f'phase "{target}"; phases belong below the edge (src/run/)')
    for edge in sorted(API_EDGE_EXCEPTIONS - seen):
        offenders.append(f'scripts/lib/check_layering.py: the exception "{edge}" no longer '
                         f'occurs: remove it from API_EDGE_EXCEPTIONS')


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-3], file=sys.stderr)
        return 2
    src = os.path.join(argv[1], 'src')
    offenders = []
    checked = check_folders(src, offenders)
    check_api_edge(src, offenders)
    for line in offenders:
        print(line)
    if offenders:
        return 1
    print(f'ok: {checked} files of src/ include only their floors; the API edge includes '
          f'{len(API_EDGE_EXCEPTIONS)} listed pipeline headers and no other')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
