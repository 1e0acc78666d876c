#!/usr/bin/env python3
"""Keeps the folder layering of src/ (docs/STYLE.md "Layout", docs/DESIGN.md §1) true.

1. Each folder of src/ includes headers of the folders FLOORS allows it and no other: the
   dependencies point downward. A folder missing from FLOORS fails too (give it a row).
2. The HTTP edges (EDGES: api/, server/, jupyter/) include no header of a pipeline phase
   (RUN_PHASES, in src/run/): they reach the pipeline only through the run engine's
   interface (run/engine.h and the data it takes and gives). No file of src/api/ is named as
   a phase either: a phase belongs below the edge, in src/run/.

Usage: check_layering.py SOURCE_DIR
       check_layering.py --self-test   (the check fails on a tree that breaks each rule)
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

# Headers of src/run/ that are pipeline phases (steps, workspace, environments, installs,
# displays, admission, the warm pool): the engine's own, below its interface.
RUN_PHASES = {
    'admission.h', 'display_manifest.h', 'environments.h', 'install_step.h', 'packages.h',
    'run_dir.h', 'run_displays.h', 'run_steps.h', 'warm_pool.h',
}
# The folders of the HTTP edge: routing, access, encoding, health and metrics.
EDGES = ('api', 'server', 'jupyter')

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


def check_edges(src, offenders):
    for edge in EDGES:
        root = os.path.join(src, edge)
        if not os.path.isdir(root):
            continue
        for dirpath, _, files in os.walk(root):
            for name in sorted(files):
                if not name.endswith(('.h', '.cc')):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, os.path.dirname(src))
                if edge == 'api' and name.rsplit('.', 1)[0] + '.h' in RUN_PHASES:
                    offenders.append(f'{rel}: a pipeline phase in the HTTP edge; phases belong '
                                     f'below it (src/run/)')
                for number, target in includes(path):
                    if target.startswith('run/') and target[4:] in RUN_PHASES:
                        offenders.append(f'{rel}:{number}: the HTTP edge includes the pipeline '
                                         f'phase "{target}"; reach it through run/engine.h')


def check(src):
    """The offenders of the tree `src` (a src/ directory), and how many files were checked."""
    offenders = []
    checked = check_folders(src, offenders)
    check_edges(src, offenders)
    return offenders, checked


def self_test():
    """Breaks each rule once in a tree of its own; the check must name every break."""
    import tempfile
    cases = {
        'api/edge.cc': '#include "run/run_steps.h"\n',   # the edge includes a phase
        'api/run_dir.cc': '#include "run/engine.h"\n',   # a phase back in the edge
        'jupyter/k.cc': '#include "run/warm_pool.h"\n',  # another edge includes a phase
        'run/phase.cc': '#include "api/http.h"\n',       # the engine includes the edge
        'newfloor/x.cc': '\n',                           # a folder without a FLOORS row
        'api/fine.cc': '#include "run/engine.h"\n',      # allowed: the engine's interface
    }
    with tempfile.TemporaryDirectory() as tree:
        for rel, text in cases.items():
            path = os.path.join(tree, 'src', rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, 'w', encoding='utf-8') as f:
                f.write(text)
        offenders, _ = check(os.path.join(tree, 'src'))
    expected = ['src/api/edge.cc:1:', 'src/api/run_dir.cc: a pipeline phase',
                'src/jupyter/k.cc:1:', 'src/run/phase.cc:1:', 'src/newfloor/:']
    missed = [e for e in expected if not any(o.startswith(e) for o in offenders)]
    wrong = [o for o in offenders if 'fine.cc' in o]
    if missed or wrong or len(offenders) != len(expected):
        print(f'self-test failed: missed {missed}, wrongly named {wrong}, got {offenders}')
        return 1
    print(f'ok: the check names each of the {len(expected)} breaks and nothing else')
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] == '--self-test':
        return self_test()
    if len(argv) != 2:
        print('usage: check_layering.py SOURCE_DIR | --self-test', file=sys.stderr)
        return 2
    offenders, checked = check(os.path.join(argv[1], 'src'))
    for line in offenders:
        print(line)
    if offenders:
        return 1
    print(f'ok: {checked} files of src/ include only their floors; the HTTP edges include no '
          f'pipeline phase')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
