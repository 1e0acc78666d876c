# shellcheck shell=bash
# The front nginx of a cluster (nginx/front.conf.in): rendering it for a list of nodes.
# Source scripts/lib/common.sh first (sr_die, SR_REPO).

# Renders nginx/front.conf.in into DIR/nginx.conf and the three files it includes, for the
# nodes given as ID=ADDRESS:PORT (ID: a node's config key node_id; ADDRESS: IPv4).
# Usage: sr_render_front DIR USER LISTEN ID=ADDRESS:PORT...
sr_render_front() {
  local dir="$1" user="$2" listen="$3" node id addr v
  for v in "$dir" "$user" "$listen"; do
    [[ $v =~ ^[A-Za-z0-9_./:@+-]+$ ]] || sr_die "unsafe character in nginx setting '$v'"
  done
  [[ $# -ge 4 ]] || sr_die "sr_render_front: no nodes"
  mkdir -p "$dir/logs" "$dir/tmp"
  : >"$dir/nodes.servers.tmp"
  : >"$dir/nodes.upstreams.tmp"
  : >"$dir/nodes.locations.tmp"
  for node in "${@:4}"; do
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
