#!/usr/bin/env python3
"""Keeps two house rules of docs/STYLE.md true in src/.

1. No function in src/**/*.cc is longer than MAX_LINES lines (from the first line of its
   signature to its closing brace; lambdas count as part of the function that holds them).
2. `errno` is read only in src/sys/ (comments and string literals aside).

Usage: check_function_length.py SOURCE_DIR [ALLOW_LIST]
  SOURCE_DIR: the repository (its src/ is checked).
  ALLOW_LIST: a file of "path" or "path:function" lines (comments after '#') that may still
  break rule 1 while they are being split; entries that no longer break it are reported too,
  so the list only shrinks.
Prints every offender as "path:line: ..." and exits 1 when there is one, else prints a
summary and exits 0. A heuristic brace scanner, not a C++ parser: it knows namespaces,
classes, structs, extern "C" blocks, comments, string and character literals and raw
strings, which is all the house style uses.
"""

import os
import re
import sys

MAX_LINES = 80

# A block whose opener text matches this holds definitions (functions are found inside it).
SCOPE_OPENER = re.compile(
    r'(^|\s)(namespace\b[^(]*|extern\s+"C"\s*|(template\s*<[^{]*>\s*)?(class|struct|union)\s+'
    r'[\w:<>, ]+(\s+final)?(\s*:[^{(]*)?)$')
# Openers that are neither functions nor scopes (data and enum bodies).
NOT_FUNCTION = re.compile(r'(=\s*$|\benum\b|^\s*$)')


def strip_code(text):
    """Blanks comments and literals, keeping newlines (so line numbers stay)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            i = j
            continue
        if text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
            continue
        raw = re.match(r'R"([^()\s]{0,16})\(', text[i:i + 20])
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_')):
            end = ')' + raw.group(1) + '"'
            j = text.find(end, i + raw.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + re.sub(r'[^\n]', ' ', text[i + 2:j]))
            i = j
            continue
        if c in '"\'':
            # A digit separator (1'000) is not a character literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum():
                out.append(' ')
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            out.append(c + ' ' * (min(j, n) - i - 1) + c)
            i = j + 1
            continue
        out.append(c)
        i += 1
    return ''.join(out)


def functions(code):
    """Yields (name, first_line, last_line) of each function body in stripped `code`."""
    stack = []  # per open brace: 'scope', 'function' or 'block'
    opener_start = 0  # offset where the text before the next top-level brace began
    func_start = None
    line_of = [0]
    for ch in code:
        line_of.append(line_of[-1] + (ch == '\n'))
    in_function = 0
    for i, ch in enumerate(code):
        if ch == '{':
            if in_function:
                stack.append('block')
                in_function += 1
                continue
            opener = code[opener_start:i].strip()
            opener = re.sub(r'^\s*#.*$', '', opener, flags=re.M).strip()
            if SCOPE_OPENER.search(opener):
                stack.append('scope')
            elif '(' in opener and not NOT_FUNCTION.search(opener):
                stack.append('function')
                in_function = 1
                first = opener_start + (len(code[opener_start:i]) -
                                        len(code[opener_start:i].lstrip()))
                name = re.findall(r'([~\w:]+|operator\S+)\s*\(', opener)
                func_start = (name[0] if name else '?', line_of[first] + 1)
            else:
                stack.append('block')
            opener_start = i + 1
        elif ch == '}':
            kind = stack.pop() if stack else 'scope'
            if in_function:
                in_function -= 1
                if in_function == 0 and kind == 'function':
                    yield func_start[0], func_start[1], line_of[i] + 1
            opener_start = i + 1
        elif ch == ';' and not in_function:
            opener_start = i + 1


def load_allow_list(path):
    allowed = set()
    if not path or not os.path.exists(path):
        return allowed
    with open(path, encoding='utf-8') as f:
        for line in f:
            entry = line.split('#', 1)[0].strip()
            if entry:
                allowed.add(entry)
    return allowed


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1]
    allowed = load_allow_list(argv[2] if len(argv) == 3 else None)
    used = set()
    offenders = []
    checked = 0
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, 'src')):
        dirnames.sort()
        for filename in sorted(filenames):
            if not filename.endswith(('.cc', '.h')):
                continue
            path = os.path.join(dirpath, filename)
            rel = os.path.relpath(path, root)
            with open(path, encoding='utf-8') as f:
                code = strip_code(f.read())
            if not rel.startswith('src/sys/'):
                for number, line in enumerate(code.split('\n'), 1):
                    if re.search(r'\berrno\b', line) and not line.lstrip().startswith('#'):
                        offenders.append(f'{rel}:{number}: errno read outside src/sys '
                                         '(use sys::LastErrno or an Error from src/sys)')
            if not filename.endswith('.cc'):
                continue
            for name, first, last in functions(code):
                checked += 1
                length = last - first + 1
                if length <= MAX_LINES:
                    continue
                for key in (f'{rel}:{name}', rel):
                    if key in allowed:
                        used.add(key)
                        break
                else:
                    offenders.append(f'{rel}:{first}: {name} is {length} lines '
                                     f'(more than {MAX_LINES}): split it into named parts')
    # Not a failure: the engineer who finishes a split may not be the one who merges last.
    for stale in sorted(allowed - used):
        print(f'note: {stale} is on the allow-list but no longer too long: remove it')
    for offender in offenders:
        print(offender)
    if offenders:
        print(f'{len(offenders)} problem(s) in src/', file=sys.stderr)
        return 1
    print(f'ok: {checked} functions in src/*.cc within {MAX_LINES} lines '
          f'({len(used)} allowed for now); errno only in src/sys')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
