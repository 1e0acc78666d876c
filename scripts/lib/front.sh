# shellcheck shell=bash
# The front nginx of a cluster (nginx/front.conf.in): rendering it for a list of nodes.
# Source scripts/lib/common.sh first (sr_die, SR_REPO).

# Prints the nodes' bearer tokens as "TOKEN KIND USER" lines (KIND: own, bound or front_end;
# USER: the user a plain or bound token acts as, "-" for a front end's), read as sandrund
# reads them: the words of config key bearer_tokens, then tokens_file's lines (a word that
# starts with '#' ends its line; words are separated by spaces or commas), each token
# optionally followed by user=NAME or front_end. A plain token's user is sandrund's
# OwnUserName: "token-" and the first 8 bytes of the token's SHA-256 in hex.
# Usage: sr_front_tokens BEARER_TOKENS_WORDS TOKENS_FILE   (either may be empty)
sr_front_tokens() {
  local words="$1" file="$2" line word
  local -a all=() ws=()
  read -r -a all <<<"${words//,/ }"
  if [[ -n $file ]]; then
    [[ -r $file ]] || sr_die "tokens_file $file is not readable"
    while IFS= read -r line || [[ -n $line ]]; do
      read -r -a ws <<<"${line//,/ }"
      for word in "${ws[@]}"; do
        [[ $word == \#* ]] && break
        all+=("$word")
      done
    done <"$file"
  fi
  local token="" kind="" name=""
  for word in "${all[@]}" ""; do
    if [[ -n $word && $word == front_end ]]; then
      kind=front_end
      name=-
      continue
    elif [[ -n $word && $word == user=* ]]; then
      kind=bound
      name="${word#user=}"
      continue
    fi
    [[ -z $token ]] || printf '%s %s %s\n' "$token" "$kind" "$name"
    token="$word"
    kind=own
    name="token-$(printf '%s' "$word" | sha256sum | cut -c1-16)"
  done
}

# Writes DIR/tokens.map, the entries of the front's affinity map (nginx/front.conf.in): for
# each token of TOKENS (sr_front_tokens lines), `"Bearer TOKEN" "USER";` for a plain or bound
# token, `"Bearer TOKEN" $http_x_sandrun_user;` for a front end's. Mode 0600: it holds the
# secrets (nginx's master reads it as root). nginx matches map strings ignoring case and
# takes no quotes or `$` in them: a token or user name with other characters than
# A-Z a-z 0-9 . _ ~ + / = : @ - (or a token over 400 bytes: nginx/front.conf.in's
# map_hash_bucket_size), or a token equal to an earlier one but for case, is left
# out with a warning (its requests hash on token and header, as with no map).
# Usage: sr_render_front_tokens DIR < TOKENS
sr_render_front_tokens() {
  local dir="$1" token kind name lower
  local -A seen=()
  (
    umask 077
    : >"$dir/tokens.map.tmp"
  )
  while read -r token kind name; do
    lower="${token,,}"
    if [[ -n ${seen[$lower]:-} ]]; then
      [[ ${seen[$lower]} == "$token" ]] ||
        sr_warn "front: a token equal to another but for case is left out of the affinity map"
      continue
    fi
    seen[$lower]="$token"
    if [[ ! $token =~ ^[A-Za-z0-9._~+/=:@-]{1,400}$ ]]; then
      sr_warn "front: a token over 400 bytes or with characters other than A-Z a-z 0-9 . _ ~ +" \
        "/ = : @ - is left out of the affinity map (its requests hash on token and X-Sandrun-User)"
      continue
    fi
    if [[ $kind == front_end ]]; then
      # shellcheck disable=SC2016 # an nginx variable
      printf '"Bearer %s" $http_x_sandrun_user;\n' "$token" >>"$dir/tokens.map.tmp"
    elif [[ $name =~ ^[A-Za-z0-9._~+/=:@-]{1,256}$ ]]; then
      printf '"Bearer %s" "%s";\n' "$token" "$name" >>"$dir/tokens.map.tmp"
    else
      sr_warn "front: the token bound to a user whose name has characters other than" \
        "A-Z a-z 0-9 . _ ~ + / = : @ - is left out of the affinity map"
    fi
  done
  mv -f "$dir/tokens.map.tmp" "$dir/tokens.map"
}

# Renders nginx/front.conf.in into DIR/nginx.conf and the files it includes, for the nodes
# given as ID=ADDRESS:PORT (ID: a node's config key node_id; ADDRESS: IPv4). The nodes' tokens
# (the same on every node), as their config keys bearer_tokens=WORDS and tokens_file=FILE,
# make the affinity map DIR/tokens.map (sr_render_front_tokens): without them it is empty.
# Usage: sr_render_front DIR USER LISTEN [bearer_tokens=WORDS] [tokens_file=FILE] ID=ADDRESS:PORT...
sr_render_front() {
  local dir="$1" user="$2" listen="$3" node id addr v words="" file=""
  for v in "$dir" "$user" "$listen"; do
    [[ $v =~ ^[A-Za-z0-9_./:@+-]+$ ]] || sr_die "unsafe character in nginx setting '$v'"
  done
  shift 3
  while [[ $# -gt 0 && ($1 == bearer_tokens=* || $1 == tokens_file=*) ]]; do
    case "$1" in
      bearer_tokens=*) words="${1#bearer_tokens=}" ;;
      tokens_file=*) file="${1#tokens_file=}" ;;
    esac
    shift
  done
  [[ $# -ge 1 ]] || sr_die "sr_render_front: no nodes"
  mkdir -p "$dir/logs" "$dir/tmp"
  sr_front_tokens "$words" "$file" | sr_render_front_tokens "$dir"
  : >"$dir/nodes.servers.tmp"
  : >"$dir/nodes.upstreams.tmp"
  : >"$dir/nodes.locations.tmp"
  for node in "$@"; do
    id="${node%%=*}"
    addr="${node#*=}"
    [[ $id =~ ^[a-z0-9][a-z0-9-]{0,31}$ ]] || sr_die "node id '$id' is not 1 to 32 of a-z 0-9 -"
    [[ $addr =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}:[0-9]{1,5}$ ]] ||
      sr_die "node $id: '$addr' is not IPv4-address:port"
    printf 'server %s max_fails=1 fail_timeout=5s;\n' "$addr" >>"$dir/nodes.servers.tmp"
    printf 'upstream sandrun_node_%s {\n  server %s;\n}\n' "${id//-/_}" "$addr" \
      >>"$dir/nodes.upstreams.tmp"
    printf 'location ^~ /files/%s/ {\n  proxy_pass http://sandrun_node_%s;\n}\n' "$id" "${id//-/_}" \
      >>"$dir/nodes.locations.tmp"
  done
  sed -e "s|@NGINX_DIR@|$dir|g" -e "s|@NGINX_USER@|$user|g" -e "s|@LISTEN@|$listen|g" \
    "$SR_REPO/nginx/front.conf.in" >"$dir/nginx.conf.tmp"
  if grep -n '@[A-Z_]*@' "$dir/nginx.conf.tmp"; then
    sr_die "placeholders left in the rendered front nginx config"
  fi
  for v in nodes.servers nodes.upstreams nodes.locations nginx.conf; do
    mv -f "$dir/$v.tmp" "$dir/$v"
  done
}
