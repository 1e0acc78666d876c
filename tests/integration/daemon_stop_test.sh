#!/usr/bin/env bash
# A second sandrund with the same cgroup_name refuses to start. A clean stop (SIGTERM) of
# sandrund leaves nothing behind: no sandrun.sock, and no runs directory in /run/sandrun/ (the
# fallback used when the state directory is not searchable by others, as under /root). The state
# directory here is under a mode-0700 directory, so the daemon uses that fallback. Then:
# sandrund started as scripts/serve starts it (setpriv --pdeathsig TERM) stops when that parent
# is killed, its self-test done (the self-test's euid switch once cleared the signal:
# integration.Cluster leaked daemons so).
# Usage: daemon_stop_test.sh SANDRUND
set -uo pipefail
daemon="$1"
top="$(mktemp -d)" # mode 0700
pid=""
orphan=""
cleanup() {
  if [[ -n $pid ]]; then kill -KILL "$pid" 2>/dev/null; fi
  if [[ -n $orphan ]]; then kill -KILL "$orphan" 2>/dev/null; fi
  rm -rf "$top"
}
trap cleanup EXIT
fail() {
  printf 'FAIL: %s\n' "$*" >&2
  [[ -f $top/log ]] && cat "$top/log" >&2
  exit 1
}

# Waits up to 30 s for "listening on" in the log while process $1 lives; $2 names what started.
wait_listening() {
  for _ in $(seq 1 300); do
    grep -q 'listening on' "$top/log" && return 0
    kill -0 "$1" 2>/dev/null || fail "$2 exited during start-up"
    sleep 0.1
  done
  fail "$2 did not start within 30 s"
}

state="$top/state"
mkdir -p "$state"
# shellcheck disable=SC2016 # $sandrun_link_secret is an nginx variable
printf 'set $sandrun_link_secret "%s";\n' "$(openssl rand -hex 32)" >"$state/link_secret.conf"
printf '{"state_dir": "%s", "allow_anonymous": true, "cgroup_name": "sandrun-stop-test-%s"}\n' \
  "$state" "$$" >"$top/config.json"
"$daemon" --config "$top/config.json" >"$top/log" 2>&1 &
pid=$!
wait_listening "$pid" sandrund
runs="$(sed -n 's/.*; runs go to \(.*\) instead$/\1/p' "$top/log")"
[[ $runs == /run/sandrun/* ]] || fail "no fallback runs directory in the log"
[[ -d $runs && -S $state/sandrun.sock ]] || fail "no $runs or no socket while running"

# A second daemon with the same cgroup_name (another state directory) refuses to start: its
# start-up sweep would kill the first one's runs (found when a test's scripts/serve swept a
# user's running stack).
mkdir -p "$top/state2"
cp "$state/link_secret.conf" "$top/state2/"
printf '{"state_dir": "%s", "allow_anonymous": true, "cgroup_name": "sandrun-stop-test-%s"}\n' \
  "$top/state2" "$$" >"$top/config2.json"
rc=0
timeout 60 "$daemon" --config "$top/config2.json" >"$top/log2" 2>&1 || rc=$?
[[ $rc -eq 1 ]] || fail "a second sandrund with the same cgroup_name exited with $rc, not 1: $(cat "$top/log2")"
grep -q "cgroup_name 'sandrun-stop-test-$$' is in use by another sandrund" "$top/log2" ||
  fail "the second sandrund did not say why: $(cat "$top/log2")"
if ! kill -0 "$pid" 2>/dev/null || [[ ! -S $state/sandrun.sock ]]; then fail "the first sandrund did not survive"; fi
printf 'ok: a second sandrund with the same cgroup_name refused to start\n'

kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
[[ $rc -eq 0 ]] || fail "sandrund exited with status $rc after SIGTERM"
[[ ! -e $state/sandrun.sock ]] || fail "$state/sandrun.sock is left after a clean stop"
[[ ! -e $runs ]] || fail "$runs is left after a clean stop"
printf 'ok: clean stop; no socket, no %s\n' "$runs"

# The parent (a shell, as scripts/serve) dies by SIGKILL once the daemon listens.
: >"$top/log"
bash -c 'setpriv --pdeathsig TERM -- "$0" --config "$1" </dev/null >>"$2" 2>&1 & echo $! >"$3"; wait' \
  "$daemon" "$top/config.json" "$top/log" "$top/orphan.pid" &
parent=$!
wait_listening "$parent" "the parent shell of sandrund under setpriv"
orphan="$(<"$top/orphan.pid")"
kill -KILL "$parent"
wait "$parent" 2>/dev/null
for _ in $(seq 1 400); do
  kill -0 "$orphan" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$orphan" 2>/dev/null; then
  fail "sandrund (pid $orphan) still runs 40 s after its parent died: no parent-death signal"
fi
orphan=""
grep -q 'signal 15: stopping' "$top/log" || fail "sandrund did not stop on its parent-death signal"
printf 'ok: sandrund stopped on SIGTERM when its parent died\n'

# Started with SIGINT ignored, as `scripts/serve &` in a script leaves it (a background job of
# a non-interactive shell ignores SIGINT, and exec keeps that): a Ctrl-C or `kill -INT` to the
# process group must still stop sandrund. It does because the daemon blocks its stop signals
# for sigwait: a blocked signal is queued even when its disposition is SIG_IGN (the kernel's
# sig_ignored(): "Blocked signals are never ignored").
: >"$top/log"
bash -c 'trap "" INT; exec "$0" --config "$1"' "$daemon" "$top/config.json" >>"$top/log" 2>&1 &
pid=$!
wait_listening "$pid" "sandrund started with SIGINT ignored"
kill -INT "$pid"
for _ in $(seq 1 300); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$pid" 2>/dev/null && fail "sandrund started with SIGINT ignored still runs 30 s after SIGINT"
rc=0
wait "$pid" || rc=$?
pid=""
[[ $rc -eq 0 ]] || fail "sandrund exited with status $rc after SIGINT"
grep -q 'signal 2: stopping' "$top/log" || fail "sandrund did not log its stop on SIGINT"
printf 'ok: sandrund started with SIGINT ignored stops on SIGINT\n'
