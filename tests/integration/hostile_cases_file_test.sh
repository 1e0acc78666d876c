#!/usr/bin/env bash
# The integration binary when tests/data/hostile_cases/runs.jsonl is missing, empty or broken:
# every other suite still registers, and the problem is ONE failing test, case_file_problems,
# that names the file (never Boost's "registered multiple times" setup error).
# Usage: hostile_cases_file_test.sh BINARY
set -uo pipefail
binary="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() {
  printf 'FAIL: %s\n' "$*" >&2
  exit 1
}

: >"$tmp/empty.jsonl"
printf '%s\n' '{"name": "a", "request": {}, "expect": {}}' '{"name": "a", "request": {}, "expect": {}}' \
  'not json' >"$tmp/broken.jsonl"
for file in "$tmp/missing.jsonl" "$tmp/empty.jsonl" "$tmp/broken.jsonl"; do
  out="$(SANDRUN_HOSTILE_CASES="$file" "$binary" --list_content 2>&1)" ||
    fail "${file##*/}: the binary does not list its tests: $out"
  grep -q 'case_file_problems' <<<"$out" || fail "${file##*/}: no case_file_problems test: $out"
  grep -q 'RunEndToEnd' <<<"$out" || fail "${file##*/}: the other suites are gone: $out"
  printf 'ok %s: listed, with case_file_problems\n' "${file##*/}"
done

# Run: one failing test whose message names the file and the problem.
out="$(SANDRUN_HOSTILE_CASES="$tmp/missing.jsonl" "$binary" --run_test=HostileCases 2>&1)" &&
  fail "a missing case file passed: $out"
# The failing run keeps its stack's state directory for inspection (stack.h); not wanted here.
kept="$(sed -n 's/^integration stack: kept \(\/tmp\/sandrun-it\.[A-Za-z0-9]*\) for inspection$/\1/p' <<<"$out")"
[[ -n $kept && -d $kept ]] && rm -rf -- "$kept"
grep -q "cannot open $tmp/missing.jsonl" <<<"$out" || fail "no clear message: $out"
grep -qi 'setup error' <<<"$out" && fail "a setup error: $out"
printf 'ok missing.jsonl: one failing test: %s\n' "$(grep -m1 'cannot open' <<<"$out")"
# A duplicate name and a bad line are named with their line numbers; the good case stays.
out="$(SANDRUN_HOSTILE_CASES="$tmp/broken.jsonl" "$binary" --list_content 2>&1)"
grep -Eq '^ +a\*?$' <<<"$out" || fail "the good case 'a' is not listed: $out"
printf 'ok broken.jsonl: the good case is listed\n'
