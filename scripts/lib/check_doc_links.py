#!/usr/bin/python3
"""Checks the links of README.md and docs/*.md: every relative link names a file or directory
of the repository, and every #anchor a heading of its target (GitHub's slugs). Prints each
broken link as FILE:LINE: TARGET: why, and exits 1 when there is one.

Usage: check_doc_links.py REPO_ROOT
"""

import os
import re
import sys

LINK = re.compile(r"\]\(([^()\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def lines_outside_code(text):
    """(line number, line) of the lines outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading):
    """GitHub's anchor of a heading: lower case, markup and punctuation gone, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    """Every anchor of a Markdown file's headings, with GitHub's -1, -2 for repeats."""
    seen = {}
    result = set()
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for _, line in lines_outside_code(text):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def check(root, doc):
    problems = []
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    for number, line in lines_outside_code(text):
        line = re.sub(r"`[^`]*`", "", line)  # code spans are not links
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target):
                continue  # http:, https:, mailto:
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
            where = f"{os.path.relpath(doc, root)}:{number}: {target}"
            if not full.startswith(os.path.abspath(root)):
                problems.append(f"{where}: outside the repository")
            elif not os.path.exists(full):
                problems.append(f"{where}: no such file")
            elif anchor and (not full.endswith(".md") or anchor not in anchors(full)):
                problems.append(f"{where}: no heading with this anchor")
    return problems


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    docs = [os.path.join(root, "README.md")]
    docs_dir = os.path.join(root, "docs")
    docs += sorted(
        os.path.join(docs_dir, name) for name in os.listdir(docs_dir) if name.endswith(".md")
    )
    problems = [p for doc in docs for p in check(root, doc)]
    for problem in problems:
        print(problem)
    print(f"{'FAIL' if problems else 'ok'}: {len(docs)} files, {len(problems)} broken links")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
