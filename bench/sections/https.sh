# The https section of bench/run.sh (`bench/run.sh https`): one core each
# (server on CPU 0, clients on CPU 1), the same certificate: plantstore over
# TLS vs nginx with TLS 1.3 in front of a canned 200: keep-alive POST at 64
# connections (wrk over https), new TLS 1.3 connections per second with full
# handshakes and with session resumption (4 openssl s_time clients), server
# CPU per request and per connection, $ROUNDS rounds; then what $TLS_IDLE
# (default 1000) idle TLS connections add to plantstore's RSS
# (bench/hold_tls.py), recorded in docs/figures.md (bench/figures.py).
# With OLD, the old binary runs before the new one in each round and a
# new/old line follows the table. The
# figures the budgets section judges: HTTPS_KEEPALIVE, HTTPS_NEW,
# HTTPS_REUSE and TLS_IDLE_GROWTH. Sourced by bench/run.sh after
# bench/lib/*.sh, whose helpers it calls.
# shellcheck shell=bash

# new_connections SECONDS MODE: 4 `openssl s_time` clients at once on
# CPU 1 against $ADDR, each making a new TLS 1.3 connection per request
# (GET /healthz over HTTP/1.0) for SECONDS; MODE -new (full handshakes) or
# -reuse (session resumption). Sets CONN_RATE (connections/s over the
# wall time) and CONN_CPU_US (server CPU µs per connection).
new_connections() {
  local seconds=$1 mode=$2 ticks started pids=() i total=0 n
  ticks=$(cpu_ticks)
  started=$(date +%s%N)
  for i in 1 2 3 4; do
    taskset -c 1 openssl s_time -connect "$ADDR" "$mode" -tls1_3 -time "$seconds" \
      -www /healthz >"$WORK/s_time.$i" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}" || true
  local wall=$(( $(date +%s%N) - started ))
  ticks=$(($(cpu_ticks) - ticks))
  for i in 1 2 3 4; do
    n=$(awk '/connections in .* real seconds/{print $1}' "$WORK/s_time.$i" | tail -1)
    total=$((total + ${n:-0}))
  done
  [ "$total" -gt 0 ] || total=1
  CONN_RATE=$(awk "BEGIN{printf \"%d\", $total * 1e9 / $wall}")
  CONN_CPU_US=$(awk "BEGIN{printf \"%.1f\", $ticks * 1000000 / $CLK_TCK / $total}")
}

# start_https SERVER TLS_FLAGS...: nginx-tls, or plantstore (or, with
# OLD, the old binary) with the certificate.
start_https() {
  local server=$1
  shift
  if [ "$server" = nginx-tls ]; then start_pinned nginx-tls; else start_pinned "$server" "$@"; fi
}

section_https() {
  need_nginx
  CLK_TCK=$(getconf CLK_TCK)
  TLS_DIR=$WORK/tls
  mkdir -p "$TLS_DIR"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -keyout "$TLS_DIR/key.pem" -out "$TLS_DIR/cert.pem" -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>/dev/null
  local tls=(--tls-cert "$TLS_DIR/cert.pem" --tls-key "$TLS_DIR/key.pem")
  local seconds=${DURATION%s}
  echo "## HTTPS on one core: server on CPU 0, clients on CPU 1 ($DURATION, $ROUNDS rounds)"
  echo
  echo "The same ECDSA P-256 certificate for both; nginx: one process, TLS 1.3 only, a"
  echo "canned 200; plantstore: \`${PINNED_ARGS:-(none)}\` and the certificate. Keep-alive:"
  echo "wrk -t1 -c64 POST /plants over https. New connections: 4 \`openssl s_time -tls1_3\`"
  echo "clients at once, one GET /healthz per connection, full handshakes (-new) and"
  echo "session resumption (-reuse). Server CPU per request or connection."
  echo
  # With OLD, the earlier binary runs first in each round, same flags.
  local server negotiated servers=(plantstore nginx-tls)
  [ -z "$OLD_BIN" ] || servers=(old plantstore nginx-tls)
  for server in "${servers[@]}"; do
    start_https "$server" "${tls[@]}"
    negotiated=$(openssl s_client -connect "$ADDR" </dev/null 2>/dev/null | awk '/^New,/{print $2, $5}')
    echo "- $server negotiates: ${negotiated:-?}"
    stop_server
  done
  echo
  echo "| round | server | keep-alive POST c64 req/s | p99 ms | CPU µs/request | new connections/s (full) | CPU µs/connection | new connections/s (resumed) | CPU µs/connection |"
  echo "|---|---|---|---|---|---|---|---|---|"
  local round
  for round in $(seq 1 "$ROUNDS"); do
    for server in "${servers[@]}"; do
      start_https "$server" "${tls[@]}"
      SCHEME=https pinned_run 64
      local row="| $round | $server | $RPS | $P99 | $CPU_US"
      add "https.$server.keepalive" "$RPS"
      new_connections "$seconds" -new
      row="$row | $CONN_RATE | $CONN_CPU_US"
      add "https.$server.new" "$CONN_RATE"
      new_connections "$seconds" -reuse
      row="$row | $CONN_RATE | $CONN_CPU_US |"
      add "https.$server.reuse" "$CONN_RATE"
      stop_server
      echo "$row"
    done
  done
  echo
  HTTPS_KEEPALIVE=$(ratio "$(mean https.plantstore.keepalive)" "$(mean https.nginx-tls.keepalive)")
  HTTPS_NEW=$(ratio "$(mean https.plantstore.new)" "$(mean https.nginx-tls.new)")
  HTTPS_REUSE=$(ratio "$(mean https.plantstore.reuse)" "$(mean https.nginx-tls.reuse)")
  echo "plantstore / nginx (means of rounds): keep-alive ${HTTPS_KEEPALIVE}x, new connections ${HTTPS_NEW}x (full), ${HTTPS_REUSE}x (resumed)."
  if [ -n "$OLD_BIN" ]; then
    echo "new / old (means of rounds): keep-alive $(ratio "$(mean https.plantstore.keepalive)" "$(mean https.old.keepalive)")x, new connections $(ratio "$(mean https.plantstore.new)" "$(mean https.old.new)")x (full), $(ratio "$(mean https.plantstore.reuse)" "$(mean https.old.reuse)")x (resumed)."
  fi
  echo
  https_idle "${tls[@]}"
}

# https_idle TLS_FLAGS...: what $TLS_IDLE (default 1000) idle TLS
# connections add to the server's RSS; sets TLS_IDLE_GROWTH.
https_idle() {
  local held=${TLS_IDLE:-1000} before with ready
  start_pinned plantstore "$@" --idle-timeout 600
  sleep 0.5
  before=$(rss_kib)
  hold "$WORK/hold_tls.out" python3 bench/hold_tls.py "$ADDR" "$held" "$TLS_DIR/cert.pem"
  ready=$(grep '^ready' "$WORK/hold_tls.out" || echo "ready 0 $held")
  sleep 1
  with=$(rss_kib)
  kill "$HOLD_PID" 2>/dev/null || true
  wait "$HOLD_PID" || true
  HOLD_PID=
  stop_server
  TLS_IDLE_GROWTH=$((with - before))
  # Published on docs/figures.md, the page every memory figure is kept on.
  python3 bench/figures.py record "tls.idle.$held" "$TLS_IDLE_GROWTH"
  echo "| idle TLS connections (bench/hold_tls.py: one GET /healthz each, then idle) | held, failed | RSS before, KiB | with them open, KiB | growth, KiB |"
  echo "|---|---|---|---|---|"
  echo "| $held | $(echo "$ready" | awk '{print $2", "$3}') | $before | $with | $TLS_IDLE_GROWTH |"
  echo
}
