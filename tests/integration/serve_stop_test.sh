#!/usr/bin/env bash
# scripts/serve started in the background of a script (`scripts/serve &`), as a user or a
# process manager may: that shell ignores SIGINT and cannot trap it, so a Ctrl-C or
# `kill -INT` to the process group reaches only nginx and sandrund. serve must then stop the
# rest and exit 0 (it said "nginx exited (status 0)" and exited 1), leaving no process. And a
# client that polls /readyz from the first moment leaves no [crit] connect() line in nginx's
# error.log (nginx starts only once the daemon's socket exists).
# And on a port another server holds it refuses to start.
# Usage: serve_stop_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src="$1"
build="$2"
top="$(mktemp -d /tmp/sandrun-serve-stop.XXXXXX)" # short: the FastCGI socket lives inside
group=""
cleanup() {
  if [[ -n $group ]]; then kill -KILL -- "-$group" 2>/dev/null; fi
  rm -rf "$top"
}
trap cleanup EXIT
fail() {
  printf 'FAIL: %s\n' "$*" >&2
  for f in "$top"/*/serve.log "$top"/*/state/logs/sandrund.log "$top"/*/state/nginx/logs/error.log; do
    [[ -s $f ]] && { printf -- '----- %s\n' "$f" >&2; tail -n 30 "$f" >&2; }
  done
  exit 1
}

# One stack: started, polled, then SIGINT to its group, either as soon as /readyz answers
# (WHEN=start-up: serve is still in its own health wait or example run) or once serve says it
# is up (WHEN=serving: serve waits for its children).
# Usage: stop_one WHEN
stop_one() {
  local when="$1" run="$top/$1" port launcher ready daemon crit rc left
  mkdir -p "$run"
  port="$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  # Its own session and process group; serve is a background job of that non-interactive bash.
  # shellcheck disable=SC2016 # expanded by that bash
  setsid env PORT="$port" SANDRUN_SCRIPT_STATE_DIR="$run/state" SANDRUN_SCRIPT_SKIP_INSTALL=1 \
    SANDRUN_SCRIPT_SKIP_BUILD=1 SANDRUN_SCRIPT_BUILD_DIR="$build" \
    bash -c '"$0/scripts/serve" >"$1/serve.log" 2>&1 & echo $! >"$1/serve.pid"; wait $!; echo $? >"$1/serve.rc"' \
    "$src" "$run" </dev/null &
  launcher=$!
  # setsid(1) of a process that leads no group calls setsid(2) in place: its pid is the group.
  group="$launcher"
  for _ in $(seq 1 100); do
    [[ -s $run/serve.pid ]] && break
    sleep 0.05
  done
  [[ -s $run/serve.pid ]] || fail "scripts/serve did not start"
  grep -q SigIgn /proc/"$(<"$run/serve.pid")"/status || fail "no /proc status for scripts/serve"

  # Poll /readyz every 50 ms from the first moment, as an impatient client does.
  ready=0
  for _ in $(seq 1 2400); do
    if [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$port/readyz" || true) == 200 ]]; then
      ready=1
      break
    fi
    [[ -e $run/serve.rc ]] && fail "scripts/serve exited during start-up"
    sleep 0.05
  done
  ((ready)) || fail "/readyz did not answer 200 within 120 s"
  if [[ $when == serving ]]; then
    for _ in $(seq 1 1200); do
      grep -q 'Press Ctrl-C to stop' "$run/serve.log" 2>/dev/null && break
      sleep 0.05
    done
    grep -q 'Press Ctrl-C to stop' "$run/serve.log" || fail "scripts/serve did not say it is up"
  fi
  daemon="$(<"$run/state/daemon.pid")"
  crit="$(grep -c '\[crit\]' "$run/state/nginx/logs/error.log" 2>/dev/null || true)"
  [[ ${crit:-0} -eq 0 ]] || fail "nginx's error.log has $crit [crit] lines after start-up"
  printf 'ok: /readyz polled from the start, no [crit] line in error.log\n'

  kill -INT -- "-$group"
  for _ in $(seq 1 600); do
    [[ -e $run/serve.rc ]] && break
    sleep 0.1
  done
  [[ -e $run/serve.rc ]] || fail "scripts/serve still runs 60 s after SIGINT to its process group"
  rc="$(<"$run/serve.rc")"
  [[ $rc == 0 ]] || fail "scripts/serve exited with status $rc after SIGINT to its process group"
  kill -0 "$daemon" 2>/dev/null && fail "sandrund (pid $daemon) still runs after scripts/serve ended"
  left="$(pgrep -g "$group" 2>/dev/null | grep -vx "$launcher" || true)"
  [[ -z $left ]] || fail "processes of the stack left after scripts/serve ended: $left"
  group=""
  printf 'ok: scripts/serve in the background stopped on SIGINT to its group (%s), exit 0, nothing left\n' "$when"
}

# A port another server holds: serve refuses before it starts anything (it said "is up", the
# other server having answered its checks, then failed when nginx could not bind).
taken_port() {
  local run="$top/taken" port holder rc=0
  mkdir -p "$run"
  /usr/bin/python3 -c '
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
time.sleep(120)
' "$run/port" &
  holder=$!
  for _ in $(seq 1 100); do
    [[ -s $run/port ]] && break
    sleep 0.05
  done
  port="$(<"$run/port")"
  PORT="$port" SANDRUN_SCRIPT_STATE_DIR="$run/state" SANDRUN_SCRIPT_SKIP_INSTALL=1 \
    SANDRUN_SCRIPT_SKIP_BUILD=1 SANDRUN_SCRIPT_BUILD_DIR="$build" timeout 60 \
    "$src/scripts/serve" >"$run/serve.log" 2>&1 </dev/null || rc=$?
  kill "$holder" 2>/dev/null
  wait "$holder" 2>/dev/null
  [[ $rc == 1 ]] || fail "scripts/serve on a taken port exited $rc, not 1"
  grep -q "127.0.0.1:$port is in use by /usr/bin/python3 -c .*(pid $holder)" "$run/serve.log" || fail "no 'in use' line: $(cat "$run/serve.log")"
  grep -q 'is up' "$run/serve.log" && fail "scripts/serve said it is up on a taken port"
  [[ -e $run/state ]] && fail "scripts/serve made its state on a taken port"
  printf 'ok: scripts/serve refused a taken port\n'
}

taken_port
stop_one start-up
stop_one serving
