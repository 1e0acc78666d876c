# shellcheck shell=bash
# The secrets of an install, shared by scripts/install (through scripts/lib/common.sh) and the
# Debian package's postinst (installed as /usr/share/sandrun/secrets.sh): the link secret
# nginx and sandrund share, and the tokens file with its first token. Needs bash, openssl,
# grep and sed; defines functions and runs nothing by itself.

sr_log() { printf '[sandrun] %s\n' "$*" >&2; }
sr_warn() { printf '[sandrun] WARNING: %s\n' "$*" >&2; }
sr_die() {
  printf '[sandrun] ERROR: %s\n' "$*" >&2
  exit 1
}

# Writes a fresh link secret file (one nginx `set` directive, DESIGN.md §7) unless one exists,
# and checks the format of an existing one. New files are mode 0640, owner root.
# Usage: sr_ensure_link_secret FILE
sr_ensure_link_secret() {
  local file="$1" tmp
  if [[ ! -s $file ]]; then
    mkdir -p "$(dirname "$file")"
    tmp="$(mktemp "$file.XXXXXX")"
    # shellcheck disable=SC2016 # $sandrun_link_secret is an nginx variable
    printf 'set $sandrun_link_secret "%s";\n' "$(openssl rand -hex 32)" >"$tmp"
    chmod 0640 "$tmp"
    mv -f "$tmp" "$file"
    sr_log "wrote a new link secret to $file"
  fi
  # shellcheck disable=SC2016 # literal nginx variable
  grep -Eqx 'set \$sandrun_link_secret "[0-9a-f]{64}";' "$file" ||
    sr_die "$file is not one line 'set \$sandrun_link_secret \"<64 hex digits>\";' (delete it to make a new one)"
}

# Creates the tokens file FILE (mode 0600) unless it exists, with two fresh tokens: the first
# token line a plain token (a user of its own: for curl and scripts), the second one marked
# `front_end` (for Open WebUI, which names its users in X-Sandrun-User: only such a token may).
# Returns 0 when it created the file, 1 when it was there already.
# Usage: sr_create_tokens_file FILE
sr_create_tokens_file() {
  local file="$1"
  [[ ! -e $file ]] || return 1
  install -d -m 0755 "$(dirname "$file")"
  (
    umask 077
    printf '# Bearer tokens of sandrun, one per line (make one: openssl rand -hex 32). A plain\n'
    printf '# token acts as a user of its own; "TOKEN user=NAME" as NAME only; "TOKEN front_end"\n'
    printf '# for a front end that names its users (X-Sandrun-User).\n'
    printf '# For curl and scripts (a user of its own):\n'
    openssl rand -hex 32
    printf '# For Open WebUI (the plugins'"'"' valve "token", or the tool server'"'"'s key):\n'
    printf '%s front_end\n' "$(openssl rand -hex 32)"
  ) >"$file.sandrun-new"
  chmod 0600 "$file.sandrun-new"
  mv -f "$file.sandrun-new" "$file"
  return 0
}

# Prints the first token of a tokens file (comments and blank lines skipped; the token only,
# without a user= or front_end after it).
# Usage: sr_first_token FILE
sr_first_token() {
  awk '$1 !~ /^#/ && NF { print $1; exit }' "$1"
}

# Prints the first token marked front_end in a tokens file; nothing if there is none.
# Usage: sr_front_end_token FILE
sr_front_end_token() {
  awk '$1 !~ /^#/ && $2 == "front_end" { print $1; exit }' "$1"
}
