#!/usr/bin/env python3
"""Checks that the commands README.md shows can run as written from a fresh clone.

A fresh clone has what git records: a file's run bit is its mode 100755 in the index
(`git ls-files -s`), not what a working copy happens to have. Checked:

1. In ```sh blocks: every command line (continuations joined, `#` comments dropped; after a
   leading `sudo`, `env` and VAR=value words, and in each part of `&&`, `||`, `;`, `|`) whose
   command is a repository path (`scripts/serve`, `./scripts/x`, `tests/install/x.sh`): the
   file exists and has its run bit.
2. Inline code spans that start with `scripts/<name>` (one level: the scripts themselves, not
   scripts/lib/ or scripts/packages/): the same, as the reader runs them as written.
3. Every other repository path the ```sh lines name, and inline spans that start with
   `scripts/` (`scripts/lib/front.sh`, ...): the file or directory exists. (Other inline
   spans may be relative to a state directory, such as `nginx/nginx.pid`.)

Usage: check_readme_commands.py REPO [README]
  README defaults to REPO/README.md. Without git (or outside a work tree), the run bit is
  read from the file system instead.
Prints each problem as "README.md:LINE: ..." and exits 1 when there is one.
"""

import os
import re
import shlex
import subprocess
import sys

# The repository's top-level directories a command or path may start with.
TOP_DIRS = ("scripts", "tests", "docs", "nginx", "packaging", "openwebui", "systemd", "src")
PATH_WORD = re.compile(r"^(?:\./)?((?:%s)/[A-Za-z0-9_./-]*[A-Za-z0-9_-])$" % "|".join(TOP_DIRS))
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def git_modes(repo):
    """{path: mode} from the git index, or None without git."""
    try:
        out = subprocess.run(["git", "-C", repo, "ls-files", "-s", "-z"], check=True,
                             capture_output=True).stdout.decode("utf-8", "replace")
    except (OSError, subprocess.CalledProcessError):
        return None
    modes = {}
    for entry in out.split("\0"):
        if "\t" in entry:
            meta, path = entry.split("\t", 1)
            modes[path] = meta.split()[0]
    return modes or None


class Checker:
    def __init__(self, repo, readme):
        self.repo = repo
        self.readme = os.path.relpath(readme, repo) if readme.startswith(repo) else readme
        self.modes = git_modes(repo)
        self.problems = []

    def exists(self, path):
        if self.modes is not None:
            return path in self.modes or any(p.startswith(path.rstrip("/") + "/")
                                             for p in self.modes)
        return os.path.exists(os.path.join(self.repo, path))

    def executable(self, path):
        if self.modes is not None:
            return self.modes.get(path) == "100755"
        full = os.path.join(self.repo, path)
        return os.path.isfile(full) and os.access(full, os.X_OK)

    def problem(self, line, text):
        self.problems.append("%s:%d: %s" % (self.readme, line, text))

    def check_path(self, line, word, command):
        match = PATH_WORD.match(word)
        if not match:
            return
        path = match.group(1)
        if not self.exists(path):
            self.problem(line, "'%s' names %s, which is not in the repository" % (word, path))
        elif command and not self.executable(path):
            self.problem(line, "'%s' is run as a command, but %s has no run bit (git: mode "
                         "100755; fix: git update-index --chmod=+x %s)" % (word, path, path))

    def check_command_line(self, line, text):
        try:
            lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
            lexer.whitespace_split = True
            lexer.commenters = "#"
            words = list(lexer)
        except ValueError:
            return  # an unbalanced quote: a fragment, not a command line
        at_command = True
        for word in words:
            if word and set(word) <= set(";&|"):
                at_command = True
                continue
            if at_command and (word in ("sudo", "env", "exec", "time") or ASSIGNMENT.match(word)):
                continue
            self.check_path(line, word, at_command)
            at_command = False

    def check_inline(self, line, span):
        words = span.split()
        if not words:
            return
        first = words[0]
        is_script = re.match(r"^(?:\./)?scripts/[A-Za-z0-9_-]+$", first) is not None
        self.check_path(line, first, is_script)

    def run(self, text):
        lines = text.split("\n")
        fence = None  # the info string of the open fence, or None
        pending, pending_line = "", 0
        for number, raw in enumerate(lines, 1):
            stripped = raw.strip()
            if stripped.startswith("```"):
                fence = None if fence is not None else stripped[3:].strip()
                continue
            if fence is not None:
                if fence in ("sh", "bash", "shell", "console"):
                    if not pending:
                        pending_line = number
                    if stripped.endswith("\\"):
                        pending += stripped[:-1] + " "
                        continue
                    self.check_command_line(pending_line, pending + stripped)
                    pending = ""
                continue
            for span in re.findall(r"`([^`\n]+)`", raw):
                if re.match(r"^(?:\./)?scripts/", span):
                    self.check_inline(number, span)
        return self.problems


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    repo = os.path.abspath(argv[1])
    readme = os.path.abspath(argv[2]) if len(argv) == 3 else os.path.join(repo, "README.md")
    with open(readme, encoding="utf-8") as f:
        problems = Checker(repo, readme).run(f.read())
    for p in problems:
        print(p)
    if problems:
        print("%d README command problem(s): a fresh clone could not run them as written"
              % len(problems), file=sys.stderr)
        return 1
    print("ok: every command and path README.md names is in the repository, commands with "
          "their run bit")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
