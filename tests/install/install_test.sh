#!/usr/bin/env bash
# install.Service: the commands of README's "Install as a service", run verbatim as root from
# the repository, for real: Debian's system nginx, the systemd unit (started the way the unit
# would start it: systemd is not PID 1 here), sandrund, a print(1) run through the site.
#
# Nothing of the machine running the test changes: everything runs in private mount, network
# and pid namespaces (unshare -m -n -p --propagation private) with
#   - overlays over /etc, /var/lib, /var/log and /usr/local whose upper layers are in a tmpfs
#     (so /etc/nginx, /etc/sandrun, /etc/systemd/system, /var/lib/sandrun, /var/lib/nginx,
#     /var/log/nginx and /usr/local/bin start as the machine's own and vanish afterwards);
#   - a fresh tmpfs on /run (no /run/systemd/system: scripts/install sees no systemd, even on a
#     machine that runs it, and never talks to the machine's systemd; no nginx pid file);
#   - its own loopback only: the site's 127.0.0.1:8080 is this namespace's.
# The namespace's PID 1 is this script: when it ends (or the timeout kills it) the kernel ends
# every process started inside, the daemon and nginx included. The Debian packages must be
# installed already (scripts/test installs them): apt inside would change the machine's /usr.
#
# Usage: install_test.sh SOURCE_DIR BUILD_DIR     (as root; ctest passes both)
# Environment: SANDRUN_INSTALL_TEST_TIMEOUT_S=480 (bound on the whole test)
set -euo pipefail

fail() {
  printf 'FAIL: %s\n' "$*" >&2
  exit 1
}
step() { printf '\n==== [%3d s] %s\n' "$SECONDS" "$*"; }

# ---- outside: checks, then the namespaces ------------------------------------------------
if [[ ${1:-} != --inside ]]; then
  [[ $# -eq 2 ]] || fail "usage: $0 SOURCE_DIR BUILD_DIR"
  src="$(cd "$1" && pwd)"
  build="$(cd "$2" && pwd)"
  [[ $EUID -eq 0 ]] || fail "run as root (it installs a service, in namespaces)"
  # shellcheck source=scripts/lib/common.sh
  source "$src/scripts/lib/common.sh"
  absent="$(sr_missing_packages "$src/scripts/packages/build.txt" \
    "$src/scripts/packages/batteries.txt" | tr '\n' ' ')"
  [[ -z $absent ]] ||
    fail "Debian packages missing: $absent(scripts/test installs them; apt-get here would change this machine)"
  [[ -x $build/src/sandrund ]] || fail "$build/src/sandrund is not built"
  tmp="$(mktemp -d /tmp/sandrun-install-test.XXXXXX)"
  trap 'rm -rf "$tmp"' EXIT
  started=$SECONDS
  rc=0
  timeout -k 10 "${SANDRUN_INSTALL_TEST_TIMEOUT_S:-480}" \
    unshare --mount --net --pid --fork --kill-child --mount-proc --propagation private -- \
    bash "$0" --inside "$src" "$build" "$tmp" || rc=$?
  printf '\ninstall test: exit status %d after %d s\n' "$rc" $((SECONDS - started))
  [[ $rc -ne 124 ]] || fail "timed out"
  exit "$rc"
fi

# ---- inside the namespaces ---------------------------------------------------------------
src="$2"
build="$3"
tmp="$4"

ip link set lo up
mount -t tmpfs -o mode=0700 sandrun-install-test "$tmp"
for dir in /etc /var/lib /var/log /usr/local; do
  name="${dir//\//_}"
  mkdir -p "$tmp/$name/upper" "$tmp/$name/work"
  mount -t overlay overlay -o "lowerdir=$dir,upperdir=$tmp/$name/upper,workdir=$tmp/$name/work" "$dir"
done
mount -t tmpfs -o mode=0755 sandrun-install-test-run /run

# Stops what the install started, gracefully (the daemon removes its cgroups), before this
# PID 1 exits and the kernel kills the rest.
cleanup() {
  local pid
  for f in /run/sandrun/sandrund.pid /run/nginx.pid; do
    if [[ -s $f ]]; then
      pid="$(<"$f")"
      kill -TERM "$pid" 2>/dev/null || true
    fi
  done
  for _ in $(seq 100); do
    pgrep -x -f '.*(sandrund|nginx).*' >/dev/null || break
    sleep 0.1
  done
}
trap cleanup EXIT

# The commands README.md shows, in order; the test fails when they differ from its block.
readme_block="$(awk '/^## Install as a service/ { s = 1 } s && /^```sh$/ { b = 1; next }
  b && /^```$/ { exit } b { print }' "$src/README.md")"
expected_block="$(
  cat <<'EOF'
scripts/install
curl -s -H "Authorization: Bearer $(grep -vm1 '^#' /etc/sandrun/tokens)" localhost:8080/run --json '{"language":"python","code":"print(1)"}'
scripts/install              # again: changes nothing, says "nothing to do"
scripts/install --uninstall  # removes what it added but the state directory /var/lib/sandrun
EOF
)"
[[ $readme_block == "$expected_block" ]] ||
  fail "README's 'Install as a service' block is not the one this test runs:"$'\n'"$readme_block"
readme_curl="$(sed -n 2p <<<"$readme_block")"

# Prints "mode owner group" of a path.
perms() { stat -c '%a %U %G' "$1"; }
expect_perms() {
  [[ $(perms "$1") == "$2" ]] || fail "$1: $(perms "$1"), expected $2"
}
# Hashes of everything the install writes (and the daemon's pid), to compare between runs.
snapshot() {
  sha256sum /usr/local/bin/sandrund /etc/sandrun/sandrun.jsonc /etc/sandrun/tokens \
    /var/lib/sandrun/link_secret.conf /etc/nginx/sites-available/sandrun \
    /etc/nginx/sandrun/* /etc/systemd/system/sandrund.service
  stat -c '%n %a %U %G %Y' /usr/local/bin/sandrund /etc/sandrun/* /etc/nginx/sandrun/* \
    /etc/nginx/sites-available/sandrun /etc/systemd/system/sandrund.service
  readlink /etc/nginx/sites-enabled/sandrun
  cat /run/sandrun/sandrund.pid /run/nginx.pid
}

cd "$src"
export SANDRUN_BUILD_DIR="$build"
printf 'PID 1 here: %s; /run/systemd/system: %s\n' "$(ps -p 1 -o comm=)" \
  "$([[ -d /run/systemd/system ]] && echo present || echo absent)"

step "0. port 8080 taken by another server: scripts/install refuses before changing anything"
python3 -m http.server --bind 127.0.0.1 8080 >/dev/null 2>&1 &
other=$!
for _ in $(seq 50); do
  curl -s -o /dev/null localhost:8080/ && break
  sleep 0.1
done
if scripts/install >"$tmp/run0.log" 2>&1; then
  cat "$tmp/run0.log"
  fail "scripts/install went ahead with port 8080 taken"
fi
cat "$tmp/run0.log"
grep -q 'port 8080 is taken by .*python3' "$tmp/run0.log" || fail "it did not say what holds port 8080"
[[ ! -e /etc/sandrun && ! -e /usr/local/bin/sandrund ]] || fail "it changed files before refusing"
kill "$other"
wait "$other" || true

step "1. scripts/install"
scripts/install >"$tmp/run1.log" 2>&1 || {
  cat "$tmp/run1.log"
  fail "scripts/install failed"
}
cat "$tmp/run1.log"
grep -q '^ok: print(1) answered' "$tmp/run1.log" || fail "no print(1) run in its output"
grep -q 'systemd is not running' "$tmp/run1.log" || fail "it did not say that systemd is not running"

step "files, owners, modes"
expect_perms /usr/local/bin/sandrund "755 root root"
cmp -s /usr/local/bin/sandrund "$build/src/sandrund" || fail "/usr/local/bin/sandrund is not the built daemon"
expect_perms /usr/local/bin/sandrun-init "755 root root"
cmp -s /usr/local/bin/sandrun-init "$build/src/sandrun-init" || fail "/usr/local/bin/sandrun-init is not the built init"
expect_perms /etc/sandrun "755 root root"
expect_perms /etc/sandrun/sandrun.jsonc "640 root root"
expect_perms /etc/sandrun/tokens "600 root root"
expect_perms /var/lib/sandrun "755 root root"
expect_perms /var/lib/sandrun/artifacts "755 root root"
expect_perms /var/lib/sandrun/link_secret.conf "640 root root"
expect_perms /etc/nginx/sites-available/sandrun "644 root root"
expect_perms /etc/nginx/sandrun "755 root root"
for f in trusted_proxies.conf trusted_proxies.geo test_pages.conf; do
  expect_perms "/etc/nginx/sandrun/$f" "644 root root"
done
expect_perms /etc/systemd/system/sandrund.service "644 root root"
cmp -s /etc/systemd/system/sandrund.service systemd/sandrund.service || fail "the unit is not systemd/sandrund.service"
expect_perms /etc/systemd/system/sandrun.slice "644 root root"
cmp -s /etc/systemd/system/sandrun.slice systemd/sandrun.slice || fail "the slice is not systemd/sandrun.slice"
[[ $(readlink /etc/nginx/sites-enabled/sandrun) == /etc/nginx/sites-available/sandrun ]] ||
  fail "sites-enabled/sandrun is not a link to sites-available/sandrun"
grep -q '^  listen 127.0.0.1:8080;' /etc/nginx/sites-available/sandrun || fail "the site does not listen on 127.0.0.1:8080"
grep -q 'fastcgi_pass unix:/run/sandrun/sandrun.sock;' /etc/nginx/sites-available/sandrun ||
  fail "the site does not pass to /run/sandrun/sandrun.sock"
# Every file the site includes exists.
while read -r inc; do
  [[ -f $inc ]] || fail "the site includes $inc, which does not exist"
done < <(sed -n 's/^[[:space:]]*include[[:space:]]\+\([^;]*\);.*/\1/p' /etc/nginx/sites-available/sandrun)
nginx -t -q || fail "nginx -t fails with the site"
# shellcheck disable=SC2016 # nginx variable
grep -Eqx 'set \$sandrun_link_secret "[0-9a-f]{64}";' /var/lib/sandrun/link_secret.conf || fail "bad link secret"
mapfile -t tokens < <(grep -v '^#' /etc/sandrun/tokens)
[[ ${#tokens[@]} -eq 2 && ${tokens[0]} =~ ^[0-9a-f]{64}$ && ${tokens[1]} =~ ^[0-9a-f]{64}\ front_end$ ]] ||
  fail "tokens file: expected a plain token, then one marked front_end: $(grep -v '^#' /etc/sandrun/tokens | sed 's/[0-9a-f]\{64\}/<token>/')"
fe_token="${tokens[1]%% *}"
[[ $(grep -c "^    ${tokens[0]}\$" "$tmp/run1.log") == 1 ]] || fail "the first token was not printed once"
[[ $(grep -c "^    $fe_token\$" "$tmp/run1.log") == 1 ]] || fail "Open WebUI's token was not printed once"
grep -q "^  for Open WebUI (the line marked front_end" "$tmp/run1.log" ||
  fail "the output does not say which token is Open WebUI's"
if [[ -e /etc/nginx/sites-enabled/default ]]; then
  grep -q "^note: the system nginx also serves Debian's default site (/etc/nginx/sites-enabled/default" \
    "$tmp/run1.log" || fail "Debian's default site is enabled, and the output does not say so"
fi
grep -q '"public_url": "",' /etc/sandrun/sandrun.jsonc || fail "public_url is not empty in the config"
pid="$(cat /run/sandrun/sandrund.pid)"
[[ $(readlink "/proc/$pid/exe") == /usr/local/bin/sandrund ]] || fail "pid $pid is not /usr/local/bin/sandrund"
[[ $(tr '\0' ' ' <"/proc/$pid/cmdline") == "/usr/local/bin/sandrund --config /etc/sandrun/sandrun.jsonc " ]] ||
  fail "sandrund does not run as the unit's ExecStart"
# The daemon's mounts (root template, pool, runs) are in runs_dir, /run/sandrun/runs, none
# below the state directory: removing that never walks into them.
for _ in $(seq 100); do
  awk '$5 == "/run/sandrun/runs/.root-template/root" { found = 1 } END { exit !found }' \
    /proc/self/mountinfo && break
  sleep 0.1
done
awk '$5 == "/run/sandrun/runs/.root-template/root" { found = 1 } END { exit !found }' \
  /proc/self/mountinfo || fail "no root template mounted in /run/sandrun/runs"
! awk '{ print $5 }' /proc/self/mountinfo | grep -q '^/var/lib/sandrun/' ||
  fail "mounts below the state directory: $(awk '{ print $5 }' /proc/self/mountinfo | grep '^/var/lib/sandrun/' | head -3)"
printf 'ok: files, owners and modes; daemon pid %s\n' "$pid"

step "requests through the system nginx's site"
answer="$(eval "$readme_curl")"
printf 'README curl: %s\n' "$answer"
jq -e '.status == "ok" and .stdout == "1\n"' <<<"$answer" >/dev/null || fail "README's curl did not print 1"
code="$(curl -s -o /dev/null -w '%{http_code}' localhost:8080/run --json '{"language":"python","code":"print(1)"}')"
[[ $code == 401 ]] || fail "a request without a token answered $code, expected 401"
answer="$(curl -s -H "Authorization: Bearer ${tokens[0]}" localhost:8080/run \
  --json '{"language":"python","code":"open(\"out.txt\", \"w\").write(\"hello\")"}')"
url="$(jq -r '.files[0].url' <<<"$answer")"
[[ $url == http://localhost:8080/files/* ]] || fail "no download link: $answer"
[[ $(curl -s "$url") == hello ]] || fail "the download link $url did not serve the file"
grep -q '"POST /run HTTP/1.1" 200' /var/log/nginx/sandrun.access.log || fail "no POST /run in the site's access log"
# Open WebUI's token names its users (X-Sandrun-User); the plain one may not (403).
answer="$(curl -s -H "Authorization: Bearer $fe_token" -H 'X-Sandrun-User: webui-user-1' \
  localhost:8080/run --json '{"language":"python","code":"print(2)"}')"
jq -e '.status == "ok" and .stdout == "2\n"' <<<"$answer" >/dev/null ||
  fail "Open WebUI's token naming a user did not run: $answer"
code="$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer ${tokens[0]}" \
  -H 'X-Sandrun-User: webui-user-1' localhost:8080/run --json '{"language":"python","code":"print(2)"}')"
[[ $code == 403 ]] || fail "the plain token naming another user answered $code, expected 403"
printf 'ok: print(1) with the token, 401 without, a download link served by the site, Open WebUI'"'"'s token names users\n'

step "2. scripts/install again"
before="$(snapshot)"
scripts/install >"$tmp/run2.log" 2>&1 || {
  cat "$tmp/run2.log"
  fail "the second scripts/install failed"
}
cat "$tmp/run2.log"
grep -q '^nothing to do' "$tmp/run2.log" || fail "the second run did not say 'nothing to do'"
! grep -E '^(installed|updated|created|removed|started|restarted|reloaded|enabled|stopped):' "$tmp/run2.log" ||
  fail "the second run changed something (above)"
! grep -q "${tokens[0]}" "$tmp/run2.log" || fail "the second run printed the token again"
[[ $(snapshot) == "$before" ]] || fail "files or processes differ after the second run"
printf 'ok: nothing changed\n'

step "2b. an edited config and another address: scripts/install --listen 127.0.0.1:8081"
sed -i 's/^  "link_ttl_s": 3600,$/  "link_ttl_s": 600,/' /etc/sandrun/sandrun.jsonc
grep -q '"link_ttl_s": 600,' /etc/sandrun/sandrun.jsonc || fail "could not edit the config"
touch -d '+5 seconds' /etc/sandrun/sandrun.jsonc # clearly later than the daemon's start
scripts/install --listen 127.0.0.1:8081 >"$tmp/run2b.log" 2>&1 || {
  cat "$tmp/run2b.log"
  fail "scripts/install --listen 127.0.0.1:8081 failed"
}
cat "$tmp/run2b.log"
for line in '^updated: /etc/nginx/sites-available/sandrun ' '^reloaded: nginx' '^restarted: sandrund' \
  '^unchanged: /etc/sandrun/sandrun.jsonc' '^ok: print(1) answered'; do
  grep -q "$line" "$tmp/run2b.log" || fail "no line '$line' in its output"
done
pid="$(cat /run/sandrun/sandrund.pid)"
answer="$(curl -s -H "Authorization: Bearer ${tokens[0]}" localhost:8081/run \
  --json '{"language":"python","code":"print(1)"}')"
jq -e '.stdout == "1\n"' <<<"$answer" >/dev/null || fail "print(1) on 8081: $answer"
code="$(curl -s -o /dev/null -w '%{http_code}' localhost:8080/healthz || true)"
[[ $code == 000 ]] || fail "the site still answers on 8080 (HTTP $code)"
printf 'ok: the site moved to 8081, the daemon restarted for the edited config (pid %s)\n' "$pid"

step "3. scripts/install --uninstall"
scripts/install --uninstall >"$tmp/run3.log" 2>&1 || {
  cat "$tmp/run3.log"
  fail "scripts/install --uninstall failed"
}
cat "$tmp/run3.log"
for f in /usr/local/bin/sandrund /usr/local/bin/sandrun-init /etc/sandrun/tokens /etc/sandrun/.installed.sha256 \
  /etc/systemd/system/sandrund.service /etc/systemd/system/sandrun.slice \
  /etc/nginx/sites-available/sandrun /etc/nginx/sites-enabled/sandrun /etc/nginx/sandrun; do
  [[ ! -e $f && ! -L $f ]] || fail "$f is still there after --uninstall"
done
! kill -0 "$pid" 2>/dev/null || fail "sandrund (pid $pid) still runs after --uninstall"
[[ -s /var/lib/sandrun/link_secret.conf ]] || fail "the state directory was not kept"
grep -q '"link_ttl_s": 600,' /etc/sandrun/sandrun.jsonc || fail "the edited config was not kept"
grep -q '^kept: /etc/sandrun/sandrun.jsonc (edited' "$tmp/run3.log" || fail "--uninstall did not say it kept the edited config"
grep -q '^kept: /var/lib/sandrun ' "$tmp/run3.log" || fail "--uninstall did not say it kept /var/lib/sandrun"
nginx -t -q || fail "nginx -t fails after --uninstall"
if [[ ! -d /run/systemd/system ]] && pgrep -x nginx >/dev/null; then
  # Without systemd the script may have started nginx: it says it left it serving.
  grep -q "^kept: nginx running (pid [0-9]*), for its other sites; 'nginx -s quit' stops it" "$tmp/run3.log" ||
    fail "--uninstall did not say nginx still runs"
fi
# `nginx -s reload` returns at once: the old workers may answer for a moment (seen as 502 on
# a loaded machine, the daemon being gone), so give them a few seconds to go.
for _ in 1 2 3 4 5 6 7 8 9 10; do
  code="$(curl -s -o /dev/null -w '%{http_code}' localhost:8081/healthz || true)"
  [[ $code == 000 ]] && break
  sleep 1
done
[[ $code == 000 ]] || fail "something still answers on 127.0.0.1:8081 (HTTP $code)"
scripts/install --uninstall >"$tmp/run4.log" 2>&1 || fail "a second --uninstall failed"
cat "$tmp/run4.log"
grep -q '^nothing to do' "$tmp/run4.log" || fail "a second --uninstall did not say 'nothing to do'"
printf '\nok: install, second run, uninstall\n'
