#!/usr/bin/env bash
# install.AptLock: the scripts' apt-get (sr_apt_get, scripts/lib/common.sh) waits while another
# process holds one of apt's or dpkg's locks, saying so in one line naming the lock and its
# holder, and goes on once it is free; a lock held past SANDRUN_SCRIPT_APT_LOCK_TIMEOUT_S ends
# it with a sentence, never apt-get's bare "Could not get lock". The lock here is a POSIX
# fcntl lock (as apt's) on a file of the test's own (SR_APT_LOCKS), and apt-get a stand-in
# on PATH that records its arguments: the machine's apt and dpkg are never touched.
# Usage: apt_lock_test.sh SOURCE_DIR
set -euo pipefail
src="$(cd "$1" && pwd)"
fail() {
  printf 'FAIL: %s\n' "$*" >&2
  exit 1
}
top="$(mktemp -d /tmp/sandrun-apt-lock.XXXXXX)"
holder=""
cleanup() {
  [[ -z $holder ]] || kill "$holder" 2>/dev/null || true
  rm -rf "$top"
}
trap cleanup EXIT
mkdir -p "$top/bin"
cat >"$top/bin/apt-get" <<'SH'
#!/bin/sh
printf '%s\n' "$*" >>"$APT_LOG"
SH
chmod 0755 "$top/bin/apt-get"
: >"$top/lock-frontend"

# Holds a POSIX write lock on FILE until the file FILE.release appears; FILE.held says it has it.
hold_lock() {
  python3 - "$1" <<'PY' &
import fcntl, os, sys, time
f = open(sys.argv[1], "r+")
fcntl.lockf(f, fcntl.LOCK_EX)
open(sys.argv[1] + ".held", "w").close()
deadline = time.monotonic() + 60
while not os.path.exists(sys.argv[1] + ".release") and time.monotonic() < deadline:
    time.sleep(0.05)
PY
  holder=$!
  for ((i = 0; i < 200; i++)); do
    [[ -e $1.held ]] && return 0
    sleep 0.05
  done
  fail "the lock holder did not take the lock"
}

run_apt() {
  # shellcheck disable=SC2016 # expanded by the inner bash
  env PATH="$top/bin:$PATH" APT_LOG="$top/apt.log" SANDRUN_SCRIPT_APT_LOCK_TIMEOUT_S="$1" \
    bash -c 'source "$1/scripts/lib/common.sh"; SR_APT_LOCKS=("$2"); sr_apt_get install -y foo' \
    _ "$src" "$top/lock-frontend"
}

# 1. Free: apt-get runs at once, with the rest of the wait as dpkg's lock timeout.
run_apt 600 >"$top/out1" 2>&1 || fail "sr_apt_get failed with no lock held: $(cat "$top/out1")"
grep -Eq '^-o DPkg::Lock::Timeout=(599|600) install -y foo$' "$top/apt.log" ||
  fail "apt-get was not run with DPkg::Lock::Timeout: $(cat "$top/apt.log")"
! grep -q waiting "$top/out1" || fail "it said it waits with no lock held"

# 2. Held, then released: one line saying it waits, naming the lock and the holder's pid;
#    apt-get only after the release.
: >"$top/apt.log"
hold_lock "$top/lock-frontend"
run_apt 60 >"$top/out2" 2>&1 &
waiter=$!
for ((i = 0; i < 200; i++)); do
  grep -q 'waiting up to 60s' "$top/out2" && break
  sleep 0.05
done
grep -q "waiting up to 60s for another apt or dpkg to finish: $top/lock-frontend (held by pid $holder" \
  "$top/out2" || fail "no line saying it waits for the lock and who holds it: $(cat "$top/out2")"
[[ ! -s $top/apt.log ]] || fail "apt-get ran while the lock was held"
touch "$top/lock-frontend.release"
wait "$holder" || true
holder=""
wait "$waiter" || fail "sr_apt_get failed after the lock was released: $(cat "$top/out2")"
grep -q 'install -y foo' "$top/apt.log" || fail "apt-get did not run after the release"
[[ $(grep -c 'waiting up to' "$top/out2") == 1 ]] || fail "the wait line was repeated"

# 3. Held past the timeout: a sentence naming the lock and the knob; no apt-get.
: >"$top/apt.log"
rm -f "$top/lock-frontend.release" "$top/lock-frontend.held"
hold_lock "$top/lock-frontend"
rc=0
run_apt 2 >"$top/out3" 2>&1 || rc=$?
[[ $rc != 0 ]] || fail "sr_apt_get went on while the lock was held past the timeout"
grep -q "still holds $top/lock-frontend .* after 2s" "$top/out3" ||
  fail "no sentence about the lock held past the timeout: $(cat "$top/out3")"
grep -q SANDRUN_SCRIPT_APT_LOCK_TIMEOUT_S "$top/out3" || fail "the knob is not named"
[[ ! -s $top/apt.log ]] || fail "apt-get ran while the lock was held"
touch "$top/lock-frontend.release"
printf 'ok: apt-get waits for a held apt/dpkg lock with one line, goes on after it, and stops with a sentence at the bound\n'
