#!/usr/bin/env bash
# The benchmark suite: prints markdown tables of figures on stdout.
#
#   bench/run.sh [SECTION...]    sections: durable startup (default: all)
#
#   durable   POST /plants throughput in memory vs --data (sync always and
#             never), at 16 and 64 connections
#   startup   start-up time with a journal of 1,000,000 plants
#
# Each wrk run lasts $DURATION (default 10s) after a 2 s warm-up. Figures
# drift by about 30% between runs on a small shared machine: compare rows
# of one run, as ratios. Loopback only; every server started is stopped.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
TOKEN=bench
SECTIONS=("$@")
[ ${#SECTIONS[@]} -eq 0 ] && SECTIONS=(durable startup)

if ! command -v wrk >/dev/null; then
  echo "installing wrk" >&2
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO apt-get update -qq >&2 && $SUDO apt-get install -y -qq wrk >&2
fi
[ "$(ulimit -n)" -ge 4096 ] || ulimit -n 4096 2>/dev/null || true

cargo build --release --quiet --bin plantstore --example make_journal
BIN=target/release/plantstore
WORK=$(mktemp -d)
SERVER_PID=
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

# start_server ARGS...: starts plantstore on a free loopback port (access
# log off: it would cost the server CPU); sets SERVER_PID, ADDR and
# STARTUP_MS (spawn until the port accepts a connection).
start_server() {
  local started port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  ADDR=127.0.0.1:$port
  started=$(date +%s%N)
  PLANTSTORE_TOKEN=$TOKEN "$BIN" --addr "$ADDR" --log-level warn \
    --max-plants 100000000 "$@" 2>"$WORK/server.log" &
  SERVER_PID=$!
  for _ in $(seq 1 5000); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log" >&2; exit 1; }
    sleep 0.002
  done
  STARTUP_MS=$(( ($(date +%s%N) - started) / 1000000 ))
}

stop_server() {
  kill "$SERVER_PID" && wait "$SERVER_PID" || true
  SERVER_PID=
}

# post CONNS: warm-up, then one wrk run; sets RPS, P50, P99 (ms) and ERRORS.
post() {
  local conns=$1 result
  PLANTSTORE_TOKEN=$TOKEN wrk -t2 -c"$conns" -d2s -s bench/post.lua "http://$ADDR" >/dev/null
  result=$(PLANTSTORE_TOKEN=$TOKEN wrk -t2 -c"$conns" -d"$DURATION" -s bench/post.lua \
    "http://$ADDR" | grep '^RESULT')
  read -r _ RPS P50 P99 ERRORS <<<"$result"
  P50=$(awk "BEGIN{printf \"%.2f\", $P50/1000}")
  P99=$(awk "BEGIN{printf \"%.2f\", $P99/1000}")
}

ratio() { awk "BEGIN{printf \"%.2f\", $1/$2}"; }

section_durable() {
  echo "## POST /plants: in memory vs --data (wrk -t2, $DURATION)"
  echo
  echo "| storage | connections | requests/s | p50 ms | p99 ms | errors | vs in memory |"
  echo "|---|---|---|---|---|---|---|"
  local conns mem
  for conns in 16 64; do
    start_server
    post "$conns"; mem=$RPS
    echo "| in memory | $conns | $RPS | $P50 | $P99 | $ERRORS | 1.00 |"
    stop_server
    for sync in always never; do
      rm -f "$WORK/bench.journal"
      start_server --data "$WORK/bench.journal" --sync "$sync"
      post "$conns"
      echo "| --data, --sync $sync | $conns | $RPS | $P50 | $P99 | $ERRORS | $(ratio "$RPS" "$mem") |"
      stop_server
    done
  done
  echo
}

section_startup() {
  echo "## Start-up with a 1,000,000-plant journal"
  echo
  local journal=$WORK/million.journal
  target/release/examples/make_journal "$journal" 1000000
  echo "| run | journal bytes | spawn to accepting ms | RSS after start KiB |"
  echo "|---|---|---|---|"
  local run
  for run in 1 2 3; do
    start_server --data "$journal"
    echo "| $run | $(stat -c %s "$journal") | $STARTUP_MS | $(awk '/VmRSS/{print $2}' "/proc/$SERVER_PID/status") |"
    stop_server
  done
  echo
}

echo "# plantstore $(grep -m1 '^version' Cargo.toml | cut -d'"' -f2) benchmarks, $(nproc) cores, $(date -u +%Y-%m-%d)"
echo
for section in "${SECTIONS[@]}"; do
  "section_$section"
done
