# Servers on one core, for bench/run.sh's pinned, https, feed and postgres
# sections (cpu_ticks for the durable one too): plantstore (or the OLD
# build), the reference or nginx started on CPU 0 with a client on CPU 1, a
# wrk run that also counts the server's CPU and context switches per
# request, holders of idle connections, and Debian's nginx (installed if
# missing) with a generated configuration.
# shellcheck shell=bash

# start_pinned SERVER [FLAGS...]: starts plantstore (with $PINNED_ARGS and
# FLAGS), the old or baseline plantstore (the same way), the reference or nginx on
# CPU 0. A plantstore that has token scopes gets a token file with wrk's
# write token and a read token (an older one, without them, refuses such a
# file: it keeps PLANTSTORE_TOKEN). Either then gets 20 wrong tokens from
# 127.0.0.2, so that the auth-failure limit (on by default) has an entry
# and every request of the run pays the lookup, not only an empty table's
# check; the entry lasts a minute, longer than a run.
start_pinned() {
  local server=$1 args bin=$BIN
  shift
  read -ra args <<<"$PINNED_ARGS"
  [ "$server" != old ] || bin=$OLD_BIN
  [ "$server" != baseline ] || bin=$BASELINE_BIN
  if [[ $server == plantstore || $server == old || $server == baseline ]] && scoped "$bin"; then
    args+=(--token-file "$WORK/tokens")
  fi
  PIN=(taskset -c 0)
  case $server in
    plantstore) start_server "${args[@]}" "$@" ;;
    # start_server runs $BIN: this one, for the call it makes.
    old) local BIN=$OLD_BIN && start_server "${args[@]}" "$@" ;;
    baseline) local BIN=$BASELINE_BIN && start_server "${args[@]}" "$@" ;;
    reference) start_reference ;;
    nginx) start_nginx ;;
    nginx-tls) start_nginx tls ;;
  esac
  PIN=()
  if [[ $server == plantstore || $server == old || $server == baseline ]]; then
    local n scheme=http
    [[ " $* " != *" --tls-cert "* ]] || scheme=https
    for n in $(seq 20); do
      curl -sk -o /dev/null --interface 127.0.0.2 -H "Authorization: Bearer wrong-$n" \
        "$scheme://$ADDR/plants" || true
    done
  fi
}

# scoped BIN: whether that plantstore takes `TOKEN read` lines (and the
# auth-failure flags); writes the token file they share the first time.
scoped() {
  "$1" --help 2>/dev/null | grep -q -- --auth-failures || return 1
  [ -f "$WORK/tokens" ] || printf '%s\n%s read\n' "$TOKEN" bench-read-token >"$WORK/tokens"
}

# nginx_conf DIR HTTP: writes DIR/nginx.conf, one nginx process (no
# master) with its files in DIR, no access log, and HTTP in its http block.
nginx_conf() {
  cat >"$1/nginx.conf" <<CONF
worker_processes 1;
daemon off;
master_process off;
pid $1/nginx.pid;
error_log $1/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $1/client_body;
  proxy_temp_path $1/proxy;
  fastcgi_temp_path $1/fastcgi;
  uwsgi_temp_path $1/uwsgi;
  scgi_temp_path $1/scgi;
$2
}
CONF
}

# start_nginx [tls]: Debian's nginx, one process (master_process off: the
# process started is the worker), answering POST /plants with a canned 200
# JSON; config, logs, pid and temp files in $WORK/nginx (or nginx-tls).
# With tls, over TLS 1.3 only with $TLS_DIR's
# certificate (the one plantstore gets in the https section), session
# tickets on (nginx's default) so that a client may resume, and
# /healthz answered too.
start_nginx() {
  free_port
  local dir=$WORK/nginx${1:+-$1} started listen=$ADDR extra=
  if [ "${1:-}" = tls ]; then
    listen="$ADDR ssl"
    extra="
    ssl_certificate $TLS_DIR/cert.pem;
    ssl_certificate_key $TLS_DIR/key.pem;
    ssl_protocols TLSv1.3;
    location = /healthz {
      default_type application/json;
      return 200 '{\"status\":\"ok\"}';
    }"
  fi
  mkdir -p "$dir"
  nginx_conf "$dir" "
  keepalive_requests 1000000;
  keepalive_timeout 600s;
  server {
    listen $listen;
    location = /plants {
      default_type application/json;
      return 200 '{\"name\":\"plant 1\",\"tag\":\"bench\"}';
    }$extra
  }"
  started=$(date +%s%N)
  "${PIN[@]}" "$NGINX" -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log" \
    2>"$WORK/server.log" &
  SERVER_PID=$!
  wait_port "$started"
}

# hold OUT COMMAND...: runs COMMAND (a holder of idle connections,
# bench/hold.py or bench/hold_tls.py) on CPU 1 in the background, its
# output in OUT, and waits up to 2 minutes for its `ready` line; HOLD_PID
# is the holder.
hold() {
  local out=$1
  shift
  taskset -c 1 "$@" >"$out" &
  HOLD_PID=$!
  for _ in $(seq 1 1200); do
    grep -q '^ready' "$out" && break
    kill -0 "$HOLD_PID" 2>/dev/null || break
    sleep 0.1
  done
}

# server_pids: the server process and its children (none today).
server_pids() { echo "$SERVER_PID"; pgrep -P "$SERVER_PID" || true; }

# cpu_ticks: utime + stime of the server, every thread included (those
# that exited too), in clock ticks.
cpu_ticks() {
  local pid total=0
  for pid in $(server_pids); do
    total=$((total + $(sed 's/^.*) //' "/proc/$pid/stat" | awk '{print $12 + $13}')))
  done
  echo "$total"
}

# ctx_switches FILE: "TID voluntary+nonvoluntary" for every live thread of
# the server. Threads that exit between two of these are lost.
ctx_switches() {
  local pid
  for pid in $(server_pids); do
    cat "/proc/$pid/task/"*/status 2>/dev/null
  done | awk '/^Pid:/{tid=$2} /_ctxt_switches:/{n[tid]+=$2} END{for (t in n) print t, n[t]}' >"$1"
}

# pinned_run CONNS: wrk -t1 on CPU 1 with bench/post.lua (over $SCHEME,
# default http), a 2 s warm-up,
# then $DURATION measured; sets RPS, P50, P99 (ms), ERRORS, REQUESTS,
# CPU_US (server CPU µs per request) and CTX (server context switches per
# request), both over the measured run only. With MEASURE set (a command),
# `$MEASURE start` and `$MEASURE stop` run just before and after the
# measured run, as post's.
pinned_run() {
  local conns=$1 ticks switches result
  PLANTSTORE_TOKEN=$TOKEN taskset -c 1 wrk -t1 -c"$conns" -d2s -s bench/post.lua \
    "${SCHEME:-http}://$ADDR" >/dev/null
  [ -z "${MEASURE:-}" ] || $MEASURE start
  ctx_switches "$WORK/ctx.before"
  ticks=$(cpu_ticks)
  result=$(PLANTSTORE_TOKEN=$TOKEN taskset -c 1 wrk -t1 -c"$conns" -d"$DURATION" \
    -s bench/post.lua "${SCHEME:-http}://$ADDR" | grep '^RESULT')
  ticks=$(($(cpu_ticks) - ticks))
  [ -z "${MEASURE:-}" ] || $MEASURE stop
  ctx_switches "$WORK/ctx.after"
  switches=$(awk 'NR == FNR {b[$1] = $2; next} {d += $2 - b[$1]} END{print d + 0}' \
    "$WORK/ctx.before" "$WORK/ctx.after")
  read -r _ RPS P50 P99 ERRORS REQUESTS MAX <<<"$result"
  [ "$REQUESTS" -gt 0 ] || REQUESTS=1
  P50=$(awk "BEGIN{printf \"%.3f\", $P50/1000}")
  P99=$(awk "BEGIN{printf \"%.3f\", $P99/1000}")
  CPU_US=$(awk "BEGIN{printf \"%.1f\", $ticks * 1000000 / $CLK_TCK / $REQUESTS}")
  CTX=$(awk "BEGIN{printf \"%.3f\", $switches / $REQUESTS}")
}

# need_nginx: sets NGINX to Debian's nginx, installed if missing.
need_nginx() {
  NGINX=$(command -v nginx || echo /usr/sbin/nginx)
  if [ ! -x "$NGINX" ]; then
    echo "installing nginx" >&2
    SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
    $SUDO apt-get update -qq >&2 && $SUDO apt-get install -y -qq nginx >&2
    NGINX=$(command -v nginx || echo /usr/sbin/nginx)
  fi
}
