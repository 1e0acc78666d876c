#!/usr/bin/env python3
"""Keeps src/api/errors.cc the only table of the API's refusals (docs/STYLE.md "Errors").

Outside src/api/errors.cc, no file of src/ builds a refusal from a status or a code of its
own: no `ErrorResponse(`, `MakeApiError(` or `Bad(` whose first argument is a number or a
string literal, and no `ApiError{...}` written by hand. Refusals name an `ApiCode`, whose
status and code are errors.cc's table rows.

Usage: check_error_table.py SOURCE_DIR
Prints each offender as "path:line: ..." and exits 1 when there is one, else a summary and 0.
"""

import os
import re
import sys

TABLE = os.path.join('src', 'api', 'errors.cc')
# A call whose first argument is a literal status or code, or an ApiError built by hand.
LITERAL = re.compile(r'\b(ErrorResponse|MakeApiError|Bad)\s*\(\s*(\d|")|(?<!struct )\bApiError\s*\{')
COMMENT = re.compile(r'//[^\n]*')


def main(argv):
    if len(argv) != 2:
        print('usage: check_error_table.py SOURCE_DIR', file=sys.stderr)
        return 2
    root = argv[1]
    offenders = []
    files = 0
    for dirpath, _, names in os.walk(os.path.join(root, 'src')):
        for name in sorted(names):
            if not name.endswith(('.h', '.cc')):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if rel == TABLE:
                continue
            files += 1
            with open(path, encoding='utf-8', errors='replace') as f:
                text = COMMENT.sub('', f.read())
            for m in LITERAL.finditer(text):
                line = text.count('\n', 0, m.start()) + 1
                found = ' '.join(m.group(0).split())
                offenders.append(f'{rel}:{line}: a refusal with a status or code written by '
                                 f'hand ({found}...): name an ApiCode (api/errors.h) '
                                 f'and give it a row in {TABLE} if it is new')
    for line in offenders:
        print(line)
    if offenders:
        return 1
    print(f'ok: {files} files of src/ refuse only through the table of {TABLE}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
