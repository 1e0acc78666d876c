#!/usr/bin/env bash
# install.Package: scripts/package builds the .deb (lintian: no errors), then it is installed
# with dpkg for real into a throwaway root and checked there: files, owners, modes,
# conffiles, the secrets made at install, the units (systemd-analyze verify), `sandrund check`,
# the daemon socket-activated as its units start it, behind the system nginx with the
# installed site (print(1) and a download link), a reinstall that keeps secrets and edits,
# then as on a host without systemd: a daemon started by hand with config `zygote` on (its
# module is found where the package put it and serves a run), which dpkg -r stops with its
# zygote, and a purge that detaches a mount left below the state directory instead of deleting through it.
#
# The throwaway root is this machine's own Debian seen through overlays: private mount,
# network and pid namespaces (unshare) with overlays over /etc, /usr (and so /lib, a link to
# usr/lib) and /var whose upper layers are in a tmpfs, and a fresh /run. dpkg inside changes
# only the overlays (its database is under /var/lib/dpkg), and all of it vanishes when the
# test ends; the machine's packages satisfy the .deb's Depends (scripts/test installs them).
#
# Usage: package_test.sh SOURCE_DIR BUILD_DIR     (as root; ctest passes both)
# Environment: SANDRUN_PACKAGE_TEST_TIMEOUT_S=300 (bound on the part inside the namespaces)
set -euo pipefail

fail() {
  printf 'FAIL: %s\n' "$*" >&2
  exit 1
}
step() { printf '\n==== [%3d s] %s\n' "$SECONDS" "$*"; }

# ---- outside: build the package, then the namespaces -----------------------------------
if [[ ${1:-} != --inside ]]; then
  [[ $# -eq 2 ]] || fail "usage: $0 SOURCE_DIR BUILD_DIR"
  src="$(cd "$1" && pwd)"
  build="$(cd "$2" && pwd)"
  [[ $EUID -eq 0 ]] || fail "run as root (dpkg -i, in namespaces)"
  for bin in sandrund sandrun-init; do
    [[ -x $build/src/$bin ]] || fail "$build/src/$bin is not built"
  done
  step "scripts/package --lintian"
  deb="$(SANDRUN_BUILD_DIR="$build" SANDRUN_SKIP_BUILD=1 bash "$src/scripts/package" --lintian | tail -n 1)"
  [[ -f $deb && $deb == */sandrun_*_"$(dpkg --print-architecture)".deb ]] || fail "no .deb: '$deb'"
  printf 'built %s\n' "$deb"
  dpkg-deb --info "$deb"
  contents="$(dpkg-deb --contents "$deb")"
  printf '%s\n' "$contents"
  ! grep -Eq 'link_secret|/etc/sandrun/tokens' <<<"$contents" || fail "the package ships a secret"
  tmp="$(mktemp -d /tmp/sandrun-package-test.XXXXXX)"
  trap 'rm -rf "$tmp"' EXIT
  rc=0
  timeout -k 10 "${SANDRUN_PACKAGE_TEST_TIMEOUT_S:-300}" \
    unshare --mount --net --pid --fork --kill-child --mount-proc --propagation private -- \
    bash "$0" --inside "$src" "$deb" "$tmp" || rc=$?
  printf '\npackage test: exit status %d after %d s\n' "$rc" "$SECONDS"
  [[ $rc -ne 124 ]] || fail "timed out"
  exit "$rc"
fi

# ---- inside the namespaces ---------------------------------------------------------------
deb="$3"
tmp="$4"

ip link set lo up
mount -t tmpfs -o mode=0700 sandrun-package-test "$tmp"
for dir in /etc /usr /var; do
  name="${dir//\//_}"
  mkdir -p "$tmp/$name/upper" "$tmp/$name/work"
  mount -t overlay overlay -o "lowerdir=$dir,upperdir=$tmp/$name/upper,workdir=$tmp/$name/work" "$dir"
done
mount -t tmpfs -o mode=0755 sandrun-package-test-run /run
# The .deb may sit below /tmp, which stays the machine's: copy it into the tmpfs.
cp "$deb" "$tmp/sandrun.deb"
deb="$tmp/sandrun.deb"

daemon=""
cleanup() {
  [[ -n $daemon ]] && kill -TERM "$daemon" 2>/dev/null
  [[ -s /run/nginx.pid ]] && kill -QUIT "$(</run/nginx.pid)" 2>/dev/null
  for _ in $(seq 100); do
    pgrep -x -f '.*(sandrund|nginx).*' >/dev/null || break
    sleep 0.1
  done
}
trap cleanup EXIT

perms() { stat -c '%a %U %G' "$1"; }
expect_perms() {
  [[ $(perms "$1") == "$2" ]] || fail "$1: $(perms "$1"), expected $2"
}
secret_line() { cat /var/lib/sandrun/link_secret.conf; }

step "dpkg -i (systemd is not PID 1 here: $(ps -p 1 -o comm=))"
dpkg -i "$deb" >"$tmp/dpkg-i.log" 2>&1 || {
  cat "$tmp/dpkg-i.log"
  fail "dpkg -i failed"
}
cat "$tmp/dpkg-i.log"
[[ $(dpkg-query -W -f='${db:Status-Abbrev}' sandrun) == "ii " ]] || fail "sandrun is not installed (dpkg-query)"

step "files, owners, modes"
expect_perms /usr/lib/sandrun/sandrund "755 root root"
expect_perms /usr/lib/sandrun/sandrun-init "755 root root"
expect_perms /usr/lib/sandrun/_sandrun_zygote.so "644 root root"
[[ $(readlink /usr/sbin/sandrund) == ../lib/sandrun/sandrund ]] || fail "/usr/sbin/sandrund is not a link to the daemon"
for unit in sandrund.service sandrund.socket sandrun.slice; do
  expect_perms "/lib/systemd/system/$unit" "644 root root"
done
grep -qx 'ExecStart=/usr/sbin/sandrund --config /etc/sandrun/sandrun.jsonc' /lib/systemd/system/sandrund.service ||
  fail "the unit does not start /usr/sbin/sandrund"
[[ $(readlink /etc/systemd/system/multi-user.target.wants/sandrund.service) == /lib/systemd/system/sandrund.service ]] ||
  fail "sandrund.service is not enabled"
[[ $(readlink /etc/systemd/system/sockets.target.wants/sandrund.socket) == /lib/systemd/system/sandrund.socket ]] ||
  fail "sandrund.socket is not enabled"
expect_perms /etc/sandrun "755 root root"
expect_perms /etc/sandrun/sandrun.jsonc "640 root root"
grep -q '"public_url": "",' /etc/sandrun/sandrun.jsonc || fail "public_url is not empty in the config"
expect_perms /etc/sandrun/tokens "600 root root"
mapfile -t tokens < <(grep -v '^#' /etc/sandrun/tokens)
[[ ${#tokens[@]} -eq 2 && ${tokens[0]} =~ ^[0-9a-f]{64}$ && ${tokens[1]} =~ ^[0-9a-f]{64}\ front_end$ ]] ||
  fail "tokens file: expected a fresh plain token, then one marked front_end (Open WebUI's)"
! grep -q "${tokens[0]}\|${tokens[1]%% *}" "$tmp/dpkg-i.log" ||
  fail "postinst printed a token (apt's log would keep it)"
grep -q "for Open WebUI the line marked front_end" "$tmp/dpkg-i.log" ||
  fail "postinst did not say which token is Open WebUI's"
expect_perms /var/lib/sandrun "755 root root"
expect_perms /var/lib/sandrun/artifacts "755 root root"
expect_perms /var/lib/sandrun/link_secret.conf "640 root root"
# shellcheck disable=SC2016 # nginx variable
grep -Eqx 'set \$sandrun_link_secret "[0-9a-f]{64}";' /var/lib/sandrun/link_secret.conf || fail "bad link secret"
expect_perms /etc/nginx/sites-available/sandrun "644 root root"
for f in trusted_proxies.conf trusted_proxies.geo test_pages.conf; do
  expect_perms "/etc/nginx/sandrun/$f" "644 root root"
done
[[ $(readlink /etc/nginx/sites-enabled/sandrun) == /etc/nginx/sites-available/sandrun ]] ||
  fail "the site is not enabled on a first install"
conffiles="$(dpkg-query -W -f='${Conffiles}\n' sandrun | awk 'NF { print $1 }' | sort)"
expected_conffiles="$(printf '%s\n' /etc/nginx/sandrun/test_pages.conf /etc/nginx/sandrun/trusted_proxies.conf \
  /etc/nginx/sandrun/trusted_proxies.geo /etc/nginx/sites-available/sandrun /etc/sandrun/sandrun.jsonc | sort)"
[[ $conffiles == "$expected_conffiles" ]] || fail "conffiles: $conffiles"
nginx -t -q || fail "nginx -t fails with the installed site"
printf 'ok: files, owners, modes, conffiles, fresh secret and token\n'

step "systemd-analyze verify of the installed units"
rc=0
out="$(systemd-analyze verify /lib/systemd/system/sandrund.service /lib/systemd/system/sandrund.socket \
  /lib/systemd/system/sandrun.slice 2>&1)" || rc=$?
if [[ $rc -ne 0 ]] && grep -Eqi 'System has not been booted with systemd|Failed to (connect to|initialize) .*bus' <<<"$out"; then
  printf '%s\nnote: systemd-analyze cannot verify here (no systemd); scripts/test verifies systemd/*\n' "$out"
elif [[ $rc -ne 0 || -n $out ]]; then
  printf '%s\n' "$out"
  fail "systemd-analyze verify of the installed units"
else
  printf 'ok: units verify\n'
fi

step "sandrund check (the installed config)"
sandrund check >"$tmp/check.log" 2>&1 || {
  cat "$tmp/check.log"
  fail "sandrund check failed"
}
cat "$tmp/check.log"
grep -q '^sandrund check: config /etc/sandrun/sandrun.jsonc' "$tmp/check.log" || fail "check did not read the installed config"
grep -q '^ok: this host can run sandboxes' "$tmp/check.log" || fail "sandrund check did not say ok"

step "the daemon socket-activated as its units start it, behind the system nginx's installed site"
# systemd-socket-activate stands in for sandrund.socket: it listens on the unit's
# ListenStream= path and starts the unit's ExecStart with the socket (LISTEN_FDS) at the
# first connection.
socket_path="$(sed -n 's/^ListenStream=//p' /lib/systemd/system/sandrund.socket)"
[[ $socket_path == /run/sandrun/sandrun.sock ]] || fail "sandrund.socket listens on '$socket_path'"
install -d -m 0755 /run/sandrun
(
  cd /
  # Its own cgroup name: nothing of this test meets a real install's cgroups.
  exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 SANDRUN_CGROUP_NAME="sandrun-pkgtest-$$" \
    systemd-socket-activate -l "$socket_path" \
    /usr/sbin/sandrund --config /etc/sandrun/sandrun.jsonc </dev/null >"$tmp/sandrund.log" 2>&1
) &
daemon=$!
for _ in $(seq 100); do
  [[ -S $socket_path ]] && break
  sleep 0.1
done
[[ -S $socket_path ]] || fail "systemd-socket-activate made no socket at $socket_path"
# It binds with its own mode (0644); the unit's SocketMode=0666 lets nginx's workers connect.
chmod 0666 "$socket_path"
nginx || fail "nginx did not start"
for _ in $(seq 300); do
  [[ $(curl -s -o /dev/null -w '%{http_code}' localhost:8080/healthz || true) == 200 ]] && break
  kill -0 "$daemon" 2>/dev/null || {
    cat "$tmp/sandrund.log"
    fail "sandrund exited"
  }
  sleep 0.2
done
[[ $(curl -s -o /dev/null -w '%{http_code}' localhost:8080/healthz) == 200 ]] || {
  cat "$tmp/sandrund.log"
  fail "/healthz did not answer 200"
}
auth=(-H "Authorization: Bearer ${tokens[0]}")
answer="$(curl -s "${auth[@]}" localhost:8080/run --json '{"language":"python","code":"print(1)"}')"
jq -e '.status == "ok" and .stdout == "1\n"' <<<"$answer" >/dev/null || fail "print(1): $answer"
answer="$(curl -s "${auth[@]}" localhost:8080/run \
  --json '{"language":"python","code":"open(\"out.txt\", \"w\").write(\"hello\")"}')"
url="$(jq -r '.files[0].url' <<<"$answer")"
[[ $url == http://localhost:8080/files/* ]] || fail "no download link: $answer"
[[ $(curl -s "$url") == hello ]] || fail "the download link $url did not serve the file"
code="$(curl -s -o /dev/null -w '%{http_code}' localhost:8080/run --json '{"language":"python","code":"print(1)"}')"
[[ $code == 401 ]] || fail "no token: HTTP $code, expected 401"
answer="$(curl -s -H "Authorization: Bearer ${tokens[1]%% *}" -H 'X-Sandrun-User: webui-user-1' \
  localhost:8080/run --json '{"language":"python","code":"print(2)"}')"
jq -e '.status == "ok" and .stdout == "2\n"' <<<"$answer" >/dev/null ||
  fail "Open WebUI's token (front_end) naming a user: $answer"
grep -q "listening on /run/sandrun/sandrun.sock, the socket of sandrund.socket" "$tmp/sandrund.log" || {
  cat "$tmp/sandrund.log"
  fail "sandrund did not take the socket it was passed"
}
printf 'ok: socket activation; print(1) with the installed token, a download link, 401 without a token\n'

step "dpkg -i again: secrets and an edited conffile are kept"
secret_before="$(secret_line)"
sed -i 's/^  "link_ttl_s": 3600,$/  "link_ttl_s": 600,/' /etc/sandrun/sandrun.jsonc
grep -q '"link_ttl_s": 600,' /etc/sandrun/sandrun.jsonc || fail "could not edit the config"
dpkg -i "$deb" >"$tmp/dpkg-i2.log" 2>&1 </dev/null || {
  cat "$tmp/dpkg-i2.log"
  fail "the second dpkg -i failed"
}
[[ $(secret_line) == "$secret_before" ]] || fail "the reinstall changed the link secret"
[[ $(grep -v '^#' /etc/sandrun/tokens) == "$(printf '%s\n' "${tokens[@]}")" ]] ||
  fail "the reinstall changed the tokens"
grep -q '"link_ttl_s": 600,' /etc/sandrun/sandrun.jsonc || fail "the reinstall lost the config edit"
printf 'ok: link secret, tokens and the edited config kept\n'

step "stop the daemon"
kill -TERM "$daemon"
wait "$daemon" || true
daemon=""

step "a passed socket at another path than fcgi_socket: the daemon refuses it"
rc=0
(
  cd /
  exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin SANDRUN_CGROUP_NAME="sandrun-pkgtest-other-$$" \
    timeout 60 systemd-socket-activate -l "$tmp/other.sock" \
    /usr/sbin/sandrund --config /etc/sandrun/sandrun.jsonc </dev/null >"$tmp/other.log" 2>&1
) &
other=$!
for _ in $(seq 100); do
  [[ -S $tmp/other.sock ]] && break
  sleep 0.1
done
curl -s --max-time 30 --unix-socket "$tmp/other.sock" http://x/ >/dev/null || true
wait "$other" || rc=$?
cat "$tmp/other.log"
[[ $rc -eq 1 ]] || fail "sandrund with a socket at $tmp/other.sock exited with $rc, expected 1"
grep -q "must name the same path" "$tmp/other.log" || fail "it did not say why it refused the socket"
printf 'ok: a socket at another path is refused with the reason\n'

step "without systemd: a daemon started by hand (as postinst says), then dpkg -r and --purge"
# Its mounts go to runs_dir (/run/sandrun/runs), none below the state directory. A mount left
# below the state directory (as a killed daemon with an older config's runs_dir there left
# them) stands in read-only, as the root template's binds of the host are.
rm -f /run/sandrun/sandrun.sock  # the socket-activated daemon's, above
# This daemon starts its zygote: the installed _sandrun_zygote.so, beside /usr/lib/sandrun/sandrund.
sed -i 's/^  "zygote": false,$/  "zygote": true,/' /etc/sandrun/sandrun.jsonc
grep -q '^  "zygote": true,$' /etc/sandrun/sandrun.jsonc || fail "could not turn the zygote on in the config"
(
  cd /
  exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 SANDRUN_CGROUP_NAME="sandrun-pkgtest-hand-$$" \
    /usr/sbin/sandrund --config /etc/sandrun/sandrun.jsonc </dev/null >"$tmp/hand.log" 2>&1
) &
daemon=$!
for _ in $(seq 300); do
  [[ -S /run/sandrun/sandrun.sock ]] && break
  kill -0 "$daemon" 2>/dev/null || {
    cat "$tmp/hand.log"
    fail "the daemon started by hand exited"
  }
  sleep 0.1
done
[[ -S /run/sandrun/sandrun.sock ]] || fail "the daemon started by hand made no socket"
# disk_mb 99: a shape the warm pool does not fit, so the zygote serves it; the loader's own
# files name the host's copy in a run from the zygote (a documented difference).
answer="$(curl -s "${auth[@]}" localhost:8080/run --json '{"language": "python", "limits": {"disk_mb": 99},
  "code": "import sandrun_loader\nprint(1, sandrun_loader._OWN_FILES[0].startswith(\"/home/user/\"))"}')"
jq -e '.status == "ok" and .stdout == "1 False\n"' <<<"$answer" >/dev/null || {
  cat "$tmp/hand.log"
  fail "a run from the installed zygote: $answer"
}
grep -q '^sandrund: zygote started (pid [0-9]*)' "$tmp/hand.log" || fail "the daemon did not say its zygote started"
zygote_pid="$(sed -n 's/^sandrund: zygote started (pid \([0-9]*\)).*/\1/p' "$tmp/hand.log")"
printf 'ok: a run from the zygote (pid %s) of the installed _sandrun_zygote.so\n' "$zygote_pid"
awk '$5 == "/run/sandrun/runs/.root-template/root" { found = 1 } END { exit !found }' \
  /proc/self/mountinfo || fail "no root template mounted in /run/sandrun/runs"
! awk '{ print $5 }' /proc/self/mountinfo | grep -q '^/var/lib/sandrun/' ||
  fail "the daemon mounts below the state directory"
mkdir -p "$tmp/host-files" /var/lib/sandrun/runs/left-behind
printf 'a host file\n' >"$tmp/host-files/keep.txt"
mount --bind -o ro "$tmp/host-files" /var/lib/sandrun/runs/left-behind
mount -o remount,bind,ro /var/lib/sandrun/runs/left-behind
dpkg -r sandrun >"$tmp/dpkg-r.log" 2>&1 </dev/null || {
  cat "$tmp/dpkg-r.log"
  fail "dpkg -r failed"
}
cat "$tmp/dpkg-r.log"
grep -q "stopped sandrund (pid $daemon)" "$tmp/dpkg-r.log" || fail "prerm did not say it stopped the daemon"
for _ in $(seq 50); do
  kill -0 "$daemon" 2>/dev/null || break
  [[ $(awk '{ print $3 }' "/proc/$daemon/stat" 2>/dev/null) == Z ]] && break
  sleep 0.1
done
wait "$daemon" || true
kill -0 "$daemon" 2>/dev/null && fail "sandrund (pid $daemon) still runs after dpkg -r"
zygote_alive() { [[ -e /proc/$zygote_pid && $(awk '{ print $3 }' "/proc/$zygote_pid/stat" 2>/dev/null) != Z ]]; }
for _ in $(seq 50); do
  zygote_alive || break
  sleep 0.1
done
zygote_alive && fail "the zygote (pid $zygote_pid) outlived the daemon"
daemon=""
[[ -d /var/lib/sandrun && -e /etc/sandrun/tokens ]] || fail "dpkg -r removed the state or the tokens"
printf 'ok: dpkg -r stopped the daemon started by hand\n'

step "dpkg --purge"
dpkg --purge sandrun >"$tmp/dpkg-purge.log" 2>&1 || {
  cat "$tmp/dpkg-purge.log"
  fail "dpkg --purge failed"
}
cat "$tmp/dpkg-purge.log"
! grep -qi "read-only file system" "$tmp/dpkg-purge.log" || fail "the purge removed files through a mount"
[[ $(cat "$tmp/host-files/keep.txt") == "a host file" ]] || fail "the purge touched files of the mount"
! awk '{ print $5 }' /proc/self/mountinfo | grep -q '^/var/lib/sandrun' || fail "a mount is left below /var/lib/sandrun"
[[ ! -e /run/sandrun/runs ]] || fail "/run/sandrun/runs is left after the purge"
for f in /usr/lib/sandrun /usr/sbin/sandrund /lib/systemd/system/sandrund.service \
  /lib/systemd/system/sandrund.socket /lib/systemd/system/sandrun.slice /etc/sandrun /var/lib/sandrun /etc/nginx/sites-available/sandrun \
  /etc/nginx/sites-enabled/sandrun /etc/nginx/sandrun /usr/share/sandrun \
  /etc/systemd/system/multi-user.target.wants/sandrund.service \
  /etc/systemd/system/sockets.target.wants/sandrund.socket; do
  [[ ! -e $f && ! -L $f ]] || fail "$f is still there after the purge"
done
nginx -t -q || fail "nginx -t fails after the purge"
printf '\nok: package built, installed, checked, reinstalled and purged\n'
