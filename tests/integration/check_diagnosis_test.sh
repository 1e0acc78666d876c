#!/usr/bin/env bash
# integration.CheckDiagnosis: what `sandrund check` and `sandrund print-config` say, for real,
# where a new user meets them:
#   1. no --config, no /etc/sandrun/sandrun.jsonc and no scripts/serve config: exit 2 and the
#      commands to run instead;
#   2. no --config, scripts/serve's .state/sandrun.jsonc in the working directory: read, and
#      the first line says which;
#   3. in a chroot (a private mount namespace with / bound on a directory, chroot(8) into it):
#      the kernel refuses user namespaces there; check names the chroot and the fix;
#   4. as root without CAP_SYS_ADMIN (as in Docker without --privileged): named with the fix;
#   5. user.max_user_namespaces = 0, set in a user namespace the test makes (the host's own
#      value is not touched): named with the sysctl that fixes it;
#   6. print-config's runs_dir is where runs go: /run/sandrun/<n> when the state directory is
#      not searchable by others (the daemon's own fallback), and exit 2 for an explicit
#      runs_dir the daemon would refuse.
# Mounts are made only in private mount namespaces that end with the test; the host's own
# mounts and sysctls are not touched. As root. Usage: check_diagnosis_test.sh SANDRUND
set -euo pipefail
sandrund="$(realpath "$1")"
d="$(mktemp -d /tmp/sandrun-check-diag-XXXXXX)"
chmod 0755 "$d" # the runs directory below it must be searchable by the sandbox uid
trap 'rm -rf "$d"' EXIT
fail() {
  printf 'FAIL: %s\n' "$*" >&2
  exit 1
}
# Runs "$@" and keeps its exit status in $rc and its output (both streams) in $d/out.
run() {
  rc=0
  "$@" >"$d/out" 2>&1 || rc=$?
  sed 's/^/  | /' "$d/out"
}
expect_line() {
  grep -qF -- "$1" "$d/out" || fail "no line with: $1"
}

# A config of this test's own (scripts/serve writes the same keys).
make_config() { # DIR: DIR/.state/sandrun.jsonc with its link secret
  mkdir -p "$1/.state"
  # shellcheck disable=SC2016 # nginx's variable, written as is
  printf 'set $sandrun_link_secret "%s";\n' "$(openssl rand -hex 16)" >"$1/.state/link_secret.conf"
  printf '{"state_dir": "%s/.state", "allow_anonymous": true, "cgroup_name": "sandrun-check-diag-%s"}\n' \
    "$1" "$$" >"$1/.state/sandrun.jsonc"
}
make_config "$d/serve"
cfg="$d/serve/.state/sandrun.jsonc"

# /etc/sandrun hidden (an empty tmpfs over it) in a private mount namespace, where it exists.
hide_etc='if [ -d /etc/sandrun ]; then mount -t tmpfs none /etc/sandrun; fi'

echo "1. no config anywhere"
mkdir -p "$d/bin" "$d/empty"
cp "$sandrund" "$d/bin/sandrund" # no build/src/ around it: no repository to look in
run unshare --mount --propagation private bash -c "$hide_etc; cd '$d/empty' && '$d/bin/sandrund' check"
[[ $rc == 2 ]] || fail "exit $rc, not 2"
expect_line "sandrund check: no config: /etc/sandrun/sandrun.jsonc is missing"
expect_line "fix: after scripts/serve, from the repository: build/src/sandrund check --config .state/sandrun.jsonc"
run unshare --mount --propagation private bash -c "$hide_etc; cd '$d/empty' && '$d/bin/sandrund' print-config"
[[ $rc == 2 ]] || fail "print-config: exit $rc, not 2"
expect_line "sandrund print-config --config FILE"

echo "2. scripts/serve's config in the working directory"
run unshare --mount --propagation private bash -c "$hide_etc; cd '$d/serve' && '$sandrund' check"
[[ $rc == 0 ]] || fail "exit $rc, not 0"
expect_line "sandrund check: config .state/sandrun.jsonc (scripts/serve's: /etc/sandrun/sandrun.jsonc is missing; --config FILE names another)"
expect_line "ok: this host can run sandboxes"

echo "3. in a chroot"
mkdir -p "$d/root"
run unshare --mount --propagation private bash -c \
  "mount --rbind / '$d/root' && chroot '$d/root' '$sandrund' check --config '$cfg'"
[[ $rc == 1 ]] || fail "exit $rc, not 1"
expect_line "the kernel refused the sandbox's namespaces: unshare(CLONE_NEWUSER|...) as uid 64000: Operation not permitted (sandrund runs in a chroot: the kernel makes no user namespace there)"
expect_line "  fix: run sandrun outside the chroot: on the machine itself or in a VM"

echo "4. root without CAP_SYS_ADMIN"
run setpriv --bounding-set -sys_admin --inh-caps -sys_admin "$sandrund" check --config "$cfg"
[[ $rc == 1 ]] || fail "exit $rc, not 1"
expect_line "sandrund runs as root without CAP_SYS_ADMIN"
expect_line "  fix: run sandrun on the host or in a VM, or give its container every capability (docker run --privileged)"

echo "5. user namespaces disabled: max_user_namespaces = 0 in a user namespace of this test's own"
# The sysctl is per user namespace: set in the child, the host's value stays as it is.
host_max="$(cat /proc/sys/user/max_user_namespaces)"
# shellcheck disable=SC2016 # expanded by the inner shell
run unshare --user --map-root-user bash -c \
  'echo 0 >/proc/sys/user/max_user_namespaces && exec "$0" check --config "$1"' "$sandrund" "$cfg"
[[ $rc == 1 ]] || fail "exit $rc, not 1"
expect_line "user namespaces are disabled (user.max_user_namespaces = 0)"
expect_line "  fix: sysctl -w user.max_user_namespaces=15000"
[[ $(cat /proc/sys/user/max_user_namespaces) == "$host_max" ]] || fail "the host's max_user_namespaces changed"

echo "6. print-config's runs_dir"
mkdir -m 0700 "$d/private"
make_config "$d/private"
run "$sandrund" print-config --config "$d/private/.state/sandrun.jsonc"
[[ $rc == 0 ]] || fail "exit $rc, not 0"
runs_dir="$(sed -n 's/^  "runs_dir": "\(.*\)",$/\1/p' "$d/out")"
[[ $runs_dir == /run/sandrun/* ]] || fail "runs_dir '$runs_dir' is not the /run/sandrun fallback"
expect_line "sandrund print-config: runs_dir: "
expect_line "runs go to $runs_dir instead"
jq --arg r "$d/private/runs" '. + {runs_dir: $r}' "$d/private/.state/sandrun.jsonc" >"$d/explicit.json"
run "$sandrund" print-config --config "$d/explicit.json"
[[ $rc == 2 ]] || fail "explicit runs_dir: exit $rc, not 2"
expect_line "key 'runs_dir'"
echo "ok: sandrund check and print-config name the config, the chroot, the capability, disabled user namespaces and the runs_dir"
