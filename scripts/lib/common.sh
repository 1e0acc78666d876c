# shellcheck shell=bash
# Shared by scripts/serve and scripts/test: Debian packages, build, state directory, and
# starting/stopping the local stack (nginx + sandrund). Source it; it defines functions and
# SR_* variables and runs nothing by itself but sr_take_old_knob_names (below).
#
# The scripts' own knobs are SANDRUN_SCRIPT_<NAME> (SANDRUN_SCRIPT_STATE_DIR, ..._SKIP_BUILD,
# each script's header lists its own). sandrund reads SANDRUN_<KEY> as config overrides and
# no config key starts with "script_" (tests/unit/config checks it), so a knob is never taken
# for a key, as SANDRUN_STATE_DIR once was (state_dir).
#
# Variables set by the functions (read them after the call that sets them):
#   SR_REPO            repository root
#   SR_BUILD           build directory (SANDRUN_SCRIPT_BUILD_DIR, default <repo>/build)
#   SR_STATE           state directory (absolute)
#   SR_CONFIG          generated daemon config, <state>/sandrun.jsonc
#   SR_NGINX_DIR       nginx prefix, <state>/nginx
#   SR_FCGI_SOCKET, SR_ARTIFACTS_DIR, SR_LINK_SECRET_FILE   paths from the config
#   SR_NGINX_USER      www-data or root
#   SR_TRUSTED_PROXIES config key trusted_proxies (SANDRUN_TRUSTED_PROXIES wins), for nginx
#   SR_NODE_ID         config key node_id ("" on a single machine), for nginx's /files/ location
#   SR_DAEMON_PID, SR_NGINX_PID                                           while running

# The knobs' names before the SANDRUN_SCRIPT_ prefix (README named several) still work: each
# is taken as its new name when that is unset, and removed from the environment, so that it
# reaches neither sandrund (SANDRUN_STATE_DIR would set its state_dir) nor a nested script.
sr_take_old_knob_names() {
  local name old new
  for name in STATE_DIR CONFIG_EXTRA SKIP_INSTALL SKIP_BUILD BUILD_DIR BUILD_TYPE DAEMON \
    HEALTH_TIMEOUT_S TEST_PAGES_DIR LISTEN_ADDR ISOLATED ISOLATED_DIR CTEST_ARGS \
    TEST_TIMEOUT_S SKIP_FUZZ; do
    old="SANDRUN_$name"
    new="SANDRUN_SCRIPT_$name"
    [[ -n ${!old+set} ]] || continue
    [[ -n ${!new+set} ]] || export "$new=${!old}"
    unset "$old"
  done
  # scripts/test's knob for tests/fuzz/run, which keeps its own name for it.
  if [[ -n ${SANDRUN_FUZZ_TIME_S+set} && -z ${SANDRUN_SCRIPT_FUZZ_TIME_S+set} ]]; then
    export SANDRUN_SCRIPT_FUZZ_TIME_S="$SANDRUN_FUZZ_TIME_S"
  fi
}
sr_take_old_knob_names

SR_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SR_BUILD="${SANDRUN_SCRIPT_BUILD_DIR:-$SR_REPO/build}"
SR_DAEMON_PID=""
SR_NGINX_PID=""
SR_APT_UPDATED=0

# sr_log, sr_warn, sr_die, and the link secret and tokens file helpers.
# shellcheck source=scripts/lib/secrets.sh
source "$SR_REPO/scripts/lib/secrets.sh"

sr_require_root() {
  [[ $EUID -eq 0 ]] || sr_die "run as root (it installs Debian packages and builds sandboxes)"
}

# Prints the pids of the processes listening on TCP PORT (any address), one per line; nothing
# without `ss` (iproute2). Usage: sr_port_listener_pids PORT
sr_port_listener_pids() {
  command -v ss >/dev/null 2>&1 || return 0
  ss -Hltnp "sport = :$1" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u
}

# "CMDLINE (pid PID)" of a process, on one line. Usage: sr_describe_pid PID
sr_describe_pid() {
  printf '%s(pid %s)' "$(tr '\0\n' '  ' 2>/dev/null <"/proc/$1/cmdline")" "$1"
}

# Prints the package names in the given list files (comments and blank lines dropped).
sr_read_package_lists() {
  local f
  for f in "$@"; do
    [[ -r $f ]] || sr_die "package list $f not found"
    sed -e 's/#.*//' -e 's/[[:space:]]\+/\n/g' "$f" | sed '/^$/d'
  done
}

# Prints the packages named in the given list files that are not installed, one a line.
sr_missing_packages() {
  local pkg status
  while read -r pkg; do
    status="$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)"
    [[ $status == installed ]] || printf '%s\n' "$pkg"
  done < <(sr_read_package_lists "$@")
}

# The lock files apt and dpkg hold while they work (fcntl locks, seen in /proc/locks).
SR_APT_LOCKS=(/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock
  /var/cache/apt/archives/lock)

# Prints the first of SR_APT_LOCKS another process holds, with that process; nothing (and
# status 1) when none is held. Reads /proc/locks: it takes no lock itself, so it never makes
# another apt-get fail.
sr_apt_lock_holder() {
  local f dev hex ino pid
  for f in "${SR_APT_LOCKS[@]}"; do
    read -r hex ino < <(stat -c '%D %i' "$f" 2>/dev/null) || continue
    # /proc/locks names the file as major:minor:inode (hex, hex, decimal).
    dev="$(printf '%02x:%02x:%s' "$(((16#$hex >> 8) & 0xfff))" \
      "$(((16#$hex & 0xff) | ((16#$hex >> 12) & 0xfff00)))" "$ino")"
    pid="$(awk -v dev="$dev" '$6 == dev { print $5; exit } $7 == dev { print $6; exit }' \
      /proc/locks 2>/dev/null)"
    if [[ -n $pid ]]; then
      printf '%s (held by pid %s: %s)\n' "$f" "$pid" \
        "$(tr '\0' ' ' </proc/"$pid"/cmdline 2>/dev/null | cut -c1-80 || echo '?')"
      return 0
    fi
  done
  return 1
}

# apt-get with its arguments, once no other apt or dpkg holds their locks: waits (bounded by
# SANDRUN_SCRIPT_APT_LOCK_TIMEOUT_S, default 600) with a line saying so, as when scripts/test
# starts in a second terminal while scripts/serve is still installing; apt-get itself waits
# the rest of that time for dpkg's lock (DPkg::Lock::Timeout) should another one take it
# between the check and its start.
sr_apt_get() {
  local timeout="${SANDRUN_SCRIPT_APT_LOCK_TIMEOUT_S:-600}" deadline holder said=0
  [[ $timeout =~ ^[0-9]+$ ]] || sr_die "SANDRUN_SCRIPT_APT_LOCK_TIMEOUT_S=$timeout is not a number of seconds"
  deadline=$((SECONDS + timeout))
  while holder="$(sr_apt_lock_holder)"; do
    if ((SECONDS >= deadline)); then
      sr_die "another apt or dpkg still holds $holder after ${timeout}s; let it finish" \
        "(or end it), then run this again (SANDRUN_SCRIPT_APT_LOCK_TIMEOUT_S sets the wait)"
    fi
    if [[ $said == 0 ]]; then
      sr_log "waiting up to ${timeout}s for another apt or dpkg to finish: $holder"
      said=1
    fi
    sleep 1
  done
  [[ $said == 0 ]] || sr_log "apt and dpkg are free; going on"
  apt-get -o DPkg::Lock::Timeout="$((deadline > SECONDS ? deadline - SECONDS : 1))" "$@"
}

# Installs the packages named in the given list files that are not installed yet.
# Runs `apt-get update` at most once per process, and only when something is missing.
sr_install_packages() {
  local -a missing=()
  mapfile -t missing < <(sr_missing_packages "$@")
  if [[ ${#missing[@]} -eq 0 ]]; then
    return 0
  fi
  sr_log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if [[ $SR_APT_UPDATED -eq 0 ]]; then
    sr_apt_get update -q
    SR_APT_UPDATED=1
  fi
  sr_apt_get install -y -q --no-install-recommends "${missing[@]}"
}

# Makes node (>= 18) and npm available for the browser test: the machine's own when it has
# them (e.g. a newer Node.js with its npm), else Debian's nodejs and npm packages.
sr_ensure_node() {
  local major
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    sr_log "installing Debian's nodejs and npm (for the browser test)"
    export DEBIAN_FRONTEND=noninteractive
    if [[ $SR_APT_UPDATED -eq 0 ]]; then
      sr_apt_get update -q
      SR_APT_UPDATED=1
    fi
    sr_apt_get install -y -q --no-install-recommends nodejs npm
  fi
  major="$(node -p 'process.versions.node.split(".")[0]')"
  [[ $major -ge 18 ]] || sr_die "node $(node --version) is too old for the browser test (need >= 18)"
}

# Installs the browser test's npm packages into tests/browser/node_modules (never committed)
# exactly as tests/browser/package-lock.json pins them, unless they are there already.
sr_install_browser_test() {
  local dir="$SR_REPO/tests/browser" want have
  sr_ensure_node
  want="$(jq -r '.packages["node_modules/playwright-core"].version' "$dir/package-lock.json")"
  have="$(jq -r '.version' "$dir/node_modules/playwright-core/package.json" 2>/dev/null || true)"
  if [[ $want == "$have" ]]; then
    return 0
  fi
  sr_log "installing the browser test's npm packages (playwright-core $want) into $dir/node_modules"
  # The browser is Debian's /usr/bin/chromium: playwright-core downloads none.
  if ! (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error); then
    sr_die "npm ci failed (above). The browser test (tests/browser/, ctest integration.Browser)" \
      "needs the npm package playwright-core $want, pinned in $dir/package-lock.json, from" \
      "the npm registry ($(npm config get registry 2>/dev/null || echo 'npm config get registry'))." \
      "Give npm a way there (npm config set proxy URL, or npm config set registry URL for a" \
      "mirror), or copy $dir/node_modules from a machine that has it, then run this again."
  fi
}

# Configures and builds into $SR_BUILD. Extra arguments go to the cmake configure step.
# -DSANDRUN_WERROR=ON is added when CI=true. SR_BUILD_TARGETS (an array, e.g. (sandrund))
# limits the build to those targets; empty or unset: everything, tests included.
sr_build() {
  local -a args=(-DCMAKE_BUILD_TYPE="${SANDRUN_SCRIPT_BUILD_TYPE:-RelWithDebInfo}")
  if [[ ${CI:-} == true ]]; then
    args+=(-DSANDRUN_WERROR=ON)
  fi
  sr_log "building into $SR_BUILD"
  cmake -S "$SR_REPO" -B "$SR_BUILD" "${args[@]}" "$@"
  local -a targets=()
  if [[ -n ${SR_BUILD_TARGETS+x} && ${#SR_BUILD_TARGETS[@]} -gt 0 ]]; then
    targets=(--target "${SR_BUILD_TARGETS[@]}")
  fi
  cmake --build "$SR_BUILD" -j "$(nproc)" "${targets[@]}"
}

# The daemon binary: SANDRUN_SCRIPT_DAEMON, or the one in the build directory.
sr_daemon_binary() {
  printf '%s\n' "${SANDRUN_SCRIPT_DAEMON:-$SR_BUILD/src/sandrund}"
}

# Writes docs/sandrun.example.jsonc to OUT with public_url set to URL, after the HEADER lines
# (each a // comment). Used by scripts/install and scripts/package (the .deb's conffile).
# Usage: sr_render_config OUT URL HEADER...
sr_render_config() {
  local out="$1" url="$2" safe='^[][A-Za-z0-9_./:@+-]*$'
  [[ $url =~ $safe ]] || sr_die "unsafe character in public_url '$url'"
  {
    printf '%s\n' "${@:3}"
    sed "s|^  \"public_url\": \".*\",\$|  \"public_url\": \"$url\",|" \
      "$SR_REPO/docs/sandrun.example.jsonc"
  } >"$out"
  grep -qx "  \"public_url\": \"$url\"," "$out" ||
    sr_die "docs/sandrun.example.jsonc has no '  \"public_url\": ...,' line to fill in"
}

# Creates the state directory and the daemon config <state>/sandrun.jsonc, regenerated on every
# start from: the quick-start defaults below (anonymous use allowed: ONLY this local config does
# that), merged with the JSON object in the file SANDRUN_SCRIPT_CONFIG_EXTRA if set (plain JSON, no
# comments; nested objects such as "limits" and "ceilings" merge key by key).
# Usage: sr_setup_state PORT
sr_setup_state() {
  local port="$1" base extra effective key value cgroup
  SR_STATE="${SANDRUN_SCRIPT_STATE_DIR:-$SR_REPO/.state}"
  mkdir -p "$SR_STATE"
  SR_STATE="$(cd "$SR_STATE" && pwd)"
  # nginx workers (www-data) must be able to traverse it to reach files and the socket.
  chmod 0755 "$SR_STATE"
  SR_CONFIG="$SR_STATE/sandrun.jsonc"
  SR_NGINX_DIR="$SR_STATE/nginx"

  # Its own cgroup_name per state directory: a daemon's start-up kills the runs below its
  # cgroup_name, and sandrund refuses to start beside another daemon with the same one.
  cgroup="sandrun-$(printf '%s' "$SR_STATE" | sha256sum | cut -c1-8)"
  base="$(jq -n --arg state "$SR_STATE" --arg url "http://127.0.0.1:$port" --arg cgroup "$cgroup" '{
    state_dir: $state,
    cgroup_name: $cgroup,
    fcgi_socket: ($state + "/sandrun.sock"),
    artifacts_dir: ($state + "/artifacts"),
    link_secret_file: ($state + "/link_secret.conf"),
    public_url: $url,
    allow_anonymous: true
  }')"
  extra='{}'
  if [[ -n ${SANDRUN_SCRIPT_CONFIG_EXTRA:-} ]]; then
    [[ -r $SANDRUN_SCRIPT_CONFIG_EXTRA ]] || sr_die "SANDRUN_SCRIPT_CONFIG_EXTRA=$SANDRUN_SCRIPT_CONFIG_EXTRA is not readable"
    extra="$(jq -e 'if type == "object" then . else error("not a JSON object") end' \
      "$SANDRUN_SCRIPT_CONFIG_EXTRA")" || sr_die "SANDRUN_SCRIPT_CONFIG_EXTRA=$SANDRUN_SCRIPT_CONFIG_EXTRA: need a JSON object (no comments)"
  fi
  {
    printf '// Generated by scripts/serve on every start; edits here are lost.\n'
    printf '// Local quick start only: anonymous use is allowed. Override keys with a JSON file named\n'
    printf '// by SANDRUN_SCRIPT_CONFIG_EXTRA, or SANDRUN_<KEY> variables. All keys: docs/sandrun.example.jsonc\n'
    jq -n --argjson a "$base" --argjson b "$extra" '$a * $b'
  } >"$SR_CONFIG.tmp"
  mv -f "$SR_CONFIG.tmp" "$SR_CONFIG"

  # The config as sandrund reads it, defaults merged (sandrund print-config), from the file
  # alone: `env -i` keeps this shell's SANDRUN_<KEY> overrides out of it.
  effective="$(env -i "$(sr_daemon_binary)" print-config --config "$SR_CONFIG")" ||
    sr_die "sandrund print-config --config $SR_CONFIG failed (see above)"

  # trusted_proxies is rendered into nginx (sr_render_nginx); the daemon only checks it.
  SR_TRUSTED_PROXIES="${SANDRUN_TRUSTED_PROXIES-$(jq -r '.trusted_proxies' <<<"$effective")}"

  # A cluster node's links are /files/<node_id>/... (scripts/cluster); checked again by sandrund.
  SR_NODE_ID="$(jq -r '.node_id' <<<"$effective")"
  [[ -z $SR_NODE_ID || $SR_NODE_ID =~ ^[a-z0-9][a-z0-9-]{0,31}$ ]] ||
    sr_die "config key node_id: '$SR_NODE_ID' is not 1 to 32 of a-z 0-9 -"

  for key in fcgi_socket artifacts_dir link_secret_file; do
    value="$(jq -er --arg k "$key" '.[$k]' <<<"$effective")"
    [[ $value == /* ]] || sr_die "config key $key must be an absolute path, got '$value'"
    case "$key" in
      fcgi_socket) SR_FCGI_SOCKET="$value" ;;
      artifacts_dir) SR_ARTIFACTS_DIR="$value" ;;
      link_secret_file) SR_LINK_SECRET_FILE="$value" ;;
    esac
  done
  # A unix socket path must fit in sun_path (108 bytes with the NUL).
  [[ ${#SR_FCGI_SOCKET} -lt 108 ]] ||
    sr_die "socket path $SR_FCGI_SOCKET is too long for a unix socket; use a shorter SANDRUN_SCRIPT_STATE_DIR"

  # runs_dir is left to the daemon, which owns its permissions.
  mkdir -p "$SR_ARTIFACTS_DIR" "$(dirname "$SR_FCGI_SOCKET")" \
    "$SR_NGINX_DIR/logs" "$SR_NGINX_DIR/tmp" "$SR_STATE/logs"
  chmod 0755 "$SR_ARTIFACTS_DIR" "$SR_NGINX_DIR" "$SR_NGINX_DIR/tmp"
  sr_ensure_link_secret "$SR_LINK_SECRET_FILE"
}

# Chooses the nginx worker user: www-data when it can reach everything a worker touches (the
# socket's directory, the artifacts, nginx's temp directories), else root with a warning. The
# master process runs as root and reads the config and the link secret itself.
sr_pick_nginx_user() {
  local dir
  SR_NGINX_USER=www-data
  if ! id -u www-data >/dev/null 2>&1; then
    SR_NGINX_USER=root
    sr_warn "no www-data user: nginx workers run as root"
    return 0
  fi
  for dir in "$(dirname "$SR_FCGI_SOCKET")" "$SR_ARTIFACTS_DIR" "$SR_NGINX_DIR/tmp"; do
    if ! runuser -u www-data -- test -x "$dir"; then
      SR_NGINX_USER=root
      sr_warn "www-data cannot reach $dir (is a parent directory mode 0700, like /root?):" \
        "nginx workers run as root. Put the state directory elsewhere, e.g." \
        "SANDRUN_SCRIPT_STATE_DIR=/var/lib/sandrun, to run them as www-data."
      return 0
    fi
  done
}

# Writes the files nginx/sandrun-site.conf.in includes into DIR:
#   trusted_proxies.conf / trusted_proxies.geo  from TRUSTED (addresses or CIDR ranges,
#                                               separated by spaces or commas);
#   test_pages.conf   a /_test/ location serving TEST_PAGES_DIR, only when that is non-empty
#                     (the integration tests' browser page; never in a real deployment).
# Usage: sr_render_nginx_includes DIR TRUSTED TEST_PAGES_DIR
sr_render_nginx_includes() {
  local dir="$1" trusted="$2" pages="$3" entry
  : >"$dir/trusted_proxies.conf.tmp"
  : >"$dir/trusted_proxies.geo.tmp"
  for entry in ${trusted//,/ }; do
    # The daemon checks the same key with inet_pton; this keeps nginx's syntax safe.
    [[ $entry =~ ^[0-9A-Fa-f:.]+(/[0-9]{1,3})?$ ]] ||
      sr_die "trusted_proxies: '$entry' is not an IP address or CIDR range"
    printf 'set_real_ip_from %s;\n' "$entry" >>"$dir/trusted_proxies.conf.tmp"
    printf '%s 1;\n' "$entry" >>"$dir/trusted_proxies.geo.tmp"
  done
  if [[ -n $pages ]]; then
    [[ $pages =~ ^/[A-Za-z0-9_./-]+$ ]] || sr_die "unsafe test pages directory '$pages'"
    cat >"$dir/test_pages.conf.tmp" <<EOF
# Test pages (SANDRUN_SCRIPT_TEST_PAGES_DIR): only integration-test stacks have this location.
location ^~ /_test/ {
  alias $pages/;
  autoindex off;
  types {
    text/html html;
    text/javascript js;
    application/json json;
  }
  default_type application/octet-stream;
  # Its own headers, in place of the server's: the test page runs script on this origin.
  add_header X-Content-Type-Options nosniff always;
  add_header Cache-Control no-store always;
}
EOF
  else
    printf '# No test pages (SANDRUN_SCRIPT_TEST_PAGES_DIR is not set).\n' >"$dir/test_pages.conf.tmp"
  fi
  mv -f "$dir/trusted_proxies.conf.tmp" "$dir/trusted_proxies.conf"
  mv -f "$dir/trusted_proxies.geo.tmp" "$dir/trusted_proxies.geo"
  mv -f "$dir/test_pages.conf.tmp" "$dir/test_pages.conf"
}

# Renders nginx/sandrun-site.conf.in (sandrun's maps and server block, http context) into OUT.
# Values go into nginx directives unquoted: only safe characters are accepted. NODE_ID (config
# key node_id, may be empty or absent): download links are served at /files/<NODE_ID>/.
# Usage: sr_render_nginx_site OUT LISTEN INCLUDE_DIR FCGI_SOCKET ARTIFACTS_DIR LINK_SECRET_FILE \
#          ACCESS_LOG ERROR_LOG [NODE_ID]
sr_render_nginx_site() {
  local out="$1" listen="$2" incl="$3" socket="$4" artifacts="$5" secret="$6" access="$7"
  local error="$8" node="${9:-}" files=/files/ v
  for v in "${@:2:7}"; do
    # Values go into nginx directives unquoted and into sed replacements.
    [[ $v =~ ^[A-Za-z0-9_./:@+-]+$ ]] || sr_die "unsafe character in nginx setting '$v'"
  done
  if [[ -n $node ]]; then
    [[ $node =~ ^[a-z0-9][a-z0-9-]{0,31}$ ]] || sr_die "node_id '$node' is not 1 to 32 of a-z 0-9 -"
    files="/files/$node/"
  fi
  sed -e "s|@LISTEN@|$listen|g" -e "s|@INCLUDE_DIR@|$incl|g" -e "s|@FCGI_SOCKET@|$socket|g" \
    -e "s|@FILES_PREFIX@|$files|g" \
    -e "s|@ARTIFACTS_DIR@|$artifacts|g" -e "s|@LINK_SECRET_FILE@|$secret|g" \
    -e "s|@ACCESS_LOG@|$access|g" -e "s|@ERROR_LOG@|$error|g" \
    "$SR_REPO/nginx/sandrun-site.conf.in" >"$out.tmp"
  if grep -n '@[A-Z_]*@' "$out.tmp"; then
    sr_die "placeholders left in the rendered nginx site"
  fi
  mv -f "$out.tmp" "$out"
}

# Renders a private nginx into NGINX_DIR: nginx/sandrun.conf.in as nginx.conf, the site
# (sr_render_nginx_site) as sandrun-site.conf beside it, and the files the site includes
# (sr_render_nginx_includes) from TRUSTED and TEST_PAGES_DIR (both may be empty or absent).
# NODE_ID: the config key node_id (sr_render_nginx_site), may be empty or absent.
# Usage: sr_render_nginx LISTEN NGINX_DIR FCGI_SOCKET ARTIFACTS_DIR LINK_SECRET_FILE USER \
#          [TRUSTED [TEST_PAGES_DIR [NODE_ID]]]
sr_render_nginx() {
  local listen="$1" dir="$2" socket="$3" artifacts="$4" secret="$5" user="$6" v
  for v in "$dir" "$user"; do
    [[ $v =~ ^[A-Za-z0-9_./:@+-]+$ ]] || sr_die "unsafe character in nginx setting '$v'"
  done
  sr_render_nginx_includes "$dir" "${7:-}" "${8:-}"
  sr_render_nginx_site "$dir/sandrun-site.conf" "$listen" "$dir" "$socket" "$artifacts" \
    "$secret" "$dir/logs/access.log" "$dir/logs/error.log" "${9:-}"
  sed -e "s|@NGINX_DIR@|$dir|g" -e "s|@NGINX_USER@|$user|g" \
    "$SR_REPO/nginx/sandrun.conf.in" >"$dir/nginx.conf.tmp"
  if grep -n '@[A-Z_]*@' "$dir/nginx.conf.tmp"; then
    sr_die "placeholders left in the rendered nginx config"
  fi
  mv -f "$dir/nginx.conf.tmp" "$dir/nginx.conf"
}

# `nginx -t` on a rendered config; prints nginx's own output.
sr_nginx_test() {
  local dir="$1"
  nginx -t -p "$dir/" -c "$dir/nginx.conf"
}

# True if /proc/PID/cmdline contains STRING (NULs read as spaces).
sr_cmdline_has() {
  local pid="$1" needle="$2" cmdline
  # stderr first: redirections apply left to right, and the process may be gone already.
  cmdline="$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")" || return 1
  [[ $cmdline == *"$needle"* ]]
}

# True if PID is a daemon process in this host's user namespace. A sandbox process lives in
# a user namespace of its own, and may carry the daemon's command line for the moment
# between clone and its exec of sandrun-init: it is not a daemon.
sr_is_host_process() {
  local pid="$1" ns
  ns="$(readlink "/proc/$pid/ns/user" 2>/dev/null)" || return 1
  [[ $ns == "$(readlink /proc/self/ns/user)" ]]
}

# Refuses to start a second stack on the same state directory.
sr_check_not_running() {
  local pid proc
  if [[ -s $SR_NGINX_DIR/nginx.pid ]]; then
    pid="$(<"$SR_NGINX_DIR/nginx.pid")"
    if [[ $pid =~ ^[0-9]+$ ]] && sr_cmdline_has "$pid" "$SR_NGINX_DIR/nginx.conf"; then
      sr_die "nginx for $SR_STATE is already running (pid $pid); stop that scripts/serve first"
    fi
  fi
  for proc in /proc/[0-9]*; do
    pid="${proc#/proc/}"
    [[ $pid == "$$" ]] && continue
    if sr_cmdline_has "$pid" "--config $SR_CONFIG " && sr_is_host_process "$pid"; then
      sr_die "sandrund for $SR_STATE is already running (pid $pid); stop that scripts/serve first"
    fi
  done
}

# Starts sandrund and nginx in the background (children of this shell). Each gets SIGTERM
# from the kernel if this shell dies, even by SIGKILL (setpriv --pdeathsig), so nothing
# outlives it. Usage: sr_stack_start LISTEN
sr_stack_start() {
  local listen="$1" daemon
  daemon="$(sr_daemon_binary)"
  [[ -x $daemon ]] || sr_die "$daemon not found: build first (or unset SANDRUN_SCRIPT_SKIP_BUILD)"
  sr_check_not_running
  sr_pick_nginx_user
  sr_render_nginx "$listen" "$SR_NGINX_DIR" "$SR_FCGI_SOCKET" "$SR_ARTIFACTS_DIR" \
    "$SR_LINK_SECRET_FILE" "$SR_NGINX_USER" "${SR_TRUSTED_PROXIES:-}" "${SANDRUN_SCRIPT_TEST_PAGES_DIR:-}" \
    "${SR_NODE_ID:-}"
  sr_nginx_test "$SR_NGINX_DIR" 2>"$SR_NGINX_DIR/logs/test.log" || {
    cat "$SR_NGINX_DIR/logs/test.log" >&2
    sr_die "nginx rejected $SR_NGINX_DIR/nginx.conf"
  }
  # No daemon of this config is alive (checked above), so a socket file left is stale.
  rm -f "$SR_FCGI_SOCKET"

  sr_log "starting sandrund: $daemon --config $SR_CONFIG (log: $SR_STATE/logs/sandrund.log)"
  # The scripts' knobs (SANDRUN_SCRIPT_*) are never config keys, and the older names of them
  # were taken out of the environment (sr_take_old_knob_names): only SANDRUN_<KEY> reach it.
  setpriv --pdeathsig TERM -- "$daemon" --config "$SR_CONFIG" \
    </dev/null >>"$SR_STATE/logs/sandrund.log" 2>&1 &
  SR_DAEMON_PID=$!
  # For whoever watches this stack from outside (scripts/cluster's nodes, tests).
  printf '%s\n' "$SR_DAEMON_PID" >"$SR_STATE/daemon.pid"

  # nginx only once the daemon listens: a request before that (a client polling /readyz)
  # would get a 502 and leave a [crit] connect() line in nginx's error.log.
  local deadline=$((SECONDS + ${SANDRUN_SCRIPT_HEALTH_TIMEOUT_S:-60}))
  while [[ ! -S $SR_FCGI_SOCKET ]] && kill -0 "$SR_DAEMON_PID" 2>/dev/null &&
    ((SECONDS < deadline)); do
    sleep 0.05
  done
  sr_log "starting nginx on $listen as user $SR_NGINX_USER (logs: $SR_NGINX_DIR/logs/)"
  setpriv --pdeathsig TERM -- nginx -p "$SR_NGINX_DIR/" -c "$SR_NGINX_DIR/nginx.conf" \
    -g 'daemon off;' </dev/null &
  SR_NGINX_PID=$!
}

# Prints the last lines of the daemon's and nginx's logs.
sr_print_logs() {
  local f
  for f in "$SR_STATE/logs/sandrund.log" "$SR_NGINX_DIR/logs/error.log"; do
    if [[ -s $f ]]; then
      printf -- '----- last lines of %s -----\n' "$f" >&2
      tail -n 40 "$f" >&2
    fi
  done
}

# Exits 0 (the caller's EXIT trap stops the rest of the stack) when NAME, nginx or sandrund,
# exited with status RC 0: each exits 0 only when told to stop. A shell that runs in the
# background of a script (`scripts/serve &`) ignores SIGINT and cannot trap it, so a Ctrl-C
# or `kill -INT` to the process group stops only those two; the stack then ends as asked,
# at any point of its life. Returns for any other status.
# Usage: sr_end_if_stopped RC NAME
sr_end_if_stopped() {
  (($1 == 0)) || return 0
  sr_log "$2 stopped on a signal; stopping the stack"
  exit 0
}

# Waits until GET /healthz through nginx answers 200.
# Usage: sr_wait_healthy URL TIMEOUT_S
sr_wait_healthy() {
  local url="$1" timeout="$2" code body deadline rc
  deadline=$((SECONDS + timeout))
  while :; do
    if ! kill -0 "$SR_DAEMON_PID" 2>/dev/null; then
      rc=0
      wait "$SR_DAEMON_PID" || rc=$?
      SR_DAEMON_PID=""
      sr_end_if_stopped "$rc" sandrund
      sr_print_logs
      sr_die "sandrund exited during start-up (status $rc)"
    fi
    if ! kill -0 "$SR_NGINX_PID" 2>/dev/null; then
      rc=0
      wait "$SR_NGINX_PID" || rc=$?
      sr_end_if_stopped "$rc" nginx
      sr_print_logs
      sr_die "nginx exited during start-up (status $rc)"
    fi
    body="$(curl -s -w '\n%{http_code}' --max-time 10 "$url" || true)"
    code="${body##*$'\n'}"
    [[ $code == 200 ]] && return 0
    # The daemon listens only after its sandbox self-test: its own 503 is final.
    if [[ $code == 503 && $body == *'"status":"unavailable"'* ]]; then
      sr_print_logs
      printf '%s\n' "${body%$'\n'*}" >&2
      sr_die "sandrund cannot run sandboxes on this host (see above): '$(sr_daemon_binary) check --config $SR_CONFIG' explains each problem with its fix"
    fi
    if ((SECONDS >= deadline)); then
      sr_print_logs
      curl -s --max-time 10 "$url" >&2 || true
      echo >&2
      sr_die "GET $url did not answer 200 within ${timeout}s (last status: $code)"
    fi
    sleep 0.5
  done
}

# Sends SIG to PID, waits up to SECS for it to exit, then SIGKILLs it; reaps it if it is our
# child. Usage: sr_stop_pid PID SIG SECS NAME
sr_stop_pid() {
  local pid="$1" sig="$2" secs="$3" name="$4" i
  [[ -n $pid ]] || return 0
  if kill -0 "$pid" 2>/dev/null; then
    kill "-$sig" "$pid" 2>/dev/null || true
    for ((i = 0; i < secs * 10; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      # A zombie child counts as gone; `wait` below reaps it.
      [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) == Z ]] && break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null && [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) != Z ]]; then
      sr_warn "$name (pid $pid) did not stop within ${secs}s after SIG$sig; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  wait "$pid" 2>/dev/null || true
}

# Detaches every mount below the state directory STATE that a sandrund killed before its own
# clean-up left there: the root template (src/sandbox/root_template.h), the tmpfs of each run
# and of each waiting sandbox of the pool. A clean stop leaves none; nothing else mounts there.
# A fallback runs directory in /run is swept by the next start instead.
# Usage: sr_detach_state_mounts STATE
sr_detach_state_mounts() {
  local state mountpoint
  [[ -n $1 && -r /proc/self/mountinfo ]] || return 0
  state="$(realpath -m "$1")"  # as /proc/self/mountinfo shows it
  # Field 5: the mount point. Deepest first (sort -r puts a path after the ones below it).
  while read -r mountpoint; do
    umount -l "$mountpoint" 2>/dev/null || true
  done < <(awk -v state="$state/" 'index($5, state) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
}

# Stops nginx (graceful QUIT: lets downloads finish) then sandrund (TERM: it ends its
# sandboxes), then (TERM) any other background job of this shell still running: one
# sr_stack_start started but had not noted yet, as when a trap ran between its `&` and `$!`.
# Call it with the stop signals ignored (scripts/serve's stop_stack): a second signal must not
# end the shell halfway. Safe to call more than once.
sr_stack_stop() {
  local pid
  if [[ -n $SR_NGINX_PID || -n $SR_DAEMON_PID ]]; then
    sr_log "stopping nginx and sandrund"
  fi
  sr_stop_pid "$SR_NGINX_PID" QUIT 10 nginx
  SR_NGINX_PID=""
  sr_stop_pid "$SR_DAEMON_PID" TERM 30 sandrund
  if [[ -n $SR_DAEMON_PID && -n ${SR_STATE:-} ]]; then
    rm -f "$SR_STATE/daemon.pid"
    # A clean stop unmounted them already; after a KILL they are still mounted.
    sr_detach_state_mounts "$SR_STATE"
  fi
  SR_DAEMON_PID=""
  # -r: running jobs only; a finished one's pid may belong to another process by now.
  for pid in $(jobs -rp); do
    sr_stop_pid "$pid" TERM 30 "background job $pid"
  done
}

# Prints the JSON of a sandrund config file, which may have // and /* */ comments and trailing
# commas (as sandrund accepts, docs/sandrun.example.jsonc), for jq. Fails on anything else.
# Debian's python3 (scripts/packages/batteries.txt), whatever else is first on PATH.
# Usage: sr_jsonc_to_json FILE
sr_jsonc_to_json() {
  /usr/bin/python3 - "$1" <<'PY'
import json, sys

text = open(sys.argv[1], encoding="utf-8").read()
out, i, n = [], 0, len(text)
while i < n:
    c = text[i]
    if c == '"':  # a string, copied whole (escapes included)
        j = i + 1
        while j < n and text[j] != '"':
            j += 2 if text[j] == "\\" else 1
        out.append(text[i:j + 1])
        i = j + 1
    elif text.startswith("//", i):
        j = text.find("\n", i)
        i = n if j < 0 else j
    elif text.startswith("/*", i):
        j = text.find("*/", i + 2)
        i = n if j < 0 else j + 2
    else:
        if c in "}]":  # drop a trailing comma before it
            k = len(out) - 1
            while k >= 0 and out[k].isspace():
                k -= 1
            if k >= 0 and out[k] == ",":
                del out[k]
        out.append(c)
        i += 1
json.dump(json.loads("".join(out)), sys.stdout)
print()
PY
}
