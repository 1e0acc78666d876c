#!/usr/bin/env bash
# lint.ReadmeCommands: scripts/lib/check_readme_commands.py passes on this repository's README,
# and fails on a clone whose README runs a script that git records without its run bit
# (mode 100644), a missing script, or a missing file, naming each.
# Usage: readme_commands_test.sh REPO
set -euo pipefail
repo="$1"
check="$repo/scripts/lib/check_readme_commands.py"
fail() {
  printf 'FAIL: %s\n' "$*" >&2
  exit 1
}

/usr/bin/python3 "$check" "$repo" || fail "the repository's README.md has command problems (above)"

top="$(mktemp -d /tmp/sandrun-readme-check.XXXXXX)"
trap 'rm -rf "$top"' EXIT
git init -q "$top/clone"
mkdir -p "$top/clone/scripts/lib"
printf '#!/bin/sh\n' >"$top/clone/scripts/serve"
printf '#!/bin/sh\n' >"$top/clone/scripts/cluster"
printf '# lib\n' >"$top/clone/scripts/lib/front.sh"
chmod 0755 "$top/clone/scripts/serve" "$top/clone/scripts/cluster"
cat >"$top/clone/README.md" <<'MD'
Start it:

```sh
scripts/serve    # comment
NODES=2 scripts/cluster && curl -s 127.0.0.1:8080/healthz
sudo scripts/nothere \
  --flag
```

Inline: `scripts/cluster`, `scripts/lib/front.sh`, `scripts/lib/gone.sh`, `nginx/nginx.pid`.
MD
git -C "$top/clone" add -A
# As scripts/cluster once was: executable in the working copy, 100644 in git.
git -C "$top/clone" update-index --chmod=-x scripts/cluster
rc=0
out="$(/usr/bin/python3 "$check" "$top/clone" 2>&1)" || rc=$?
printf '%s\n' "$out"
[[ $rc == 1 ]] || fail "the checker exited $rc, not 1, on a README with broken commands"
grep -q "README.md:5: 'scripts/cluster' is run as a command, but scripts/cluster has no run bit" \
  <<<"$out" || fail "a script of mode 100644 in a sh block was not reported"
grep -q "README.md:10: 'scripts/cluster' is run as a command" <<<"$out" ||
  fail "an inline scripts/cluster of mode 100644 was not reported"
grep -q "README.md:6: 'scripts/nothere' names scripts/nothere, which is not in the repository" \
  <<<"$out" || fail "a missing script (continued line, after sudo) was not reported"
grep -q "scripts/lib/gone.sh, which is not in the repository" <<<"$out" ||
  fail "a missing inline path was not reported"
! grep -q "serve\|front.sh\|nginx.pid" <<<"$out" || fail "a correct command or path was reported"
[[ $(grep -c '^README.md:' <<<"$out") == 4 ]] || fail "not exactly the 4 problems expected"

git -C "$top/clone" update-index --chmod=+x scripts/cluster
printf '#!/bin/sh\n' >"$top/clone/scripts/nothere"
chmod 0755 "$top/clone/scripts/nothere"
printf '# lib\n' >"$top/clone/scripts/lib/gone.sh"
git -C "$top/clone" add -A
/usr/bin/python3 "$check" "$top/clone" || fail "the checker failed on a fixed README"
printf 'ok: the README command check passes here and catches mode 100644, missing scripts and files\n'
