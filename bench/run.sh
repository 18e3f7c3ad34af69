#!/usr/bin/env bash
# The benchmark suite: prints markdown tables of figures on stdout.
#
#   bench/run.sh [SECTION...]    (default: every section, then the budgets)
#
#   reference  POST /plants in memory, plantstore vs the axum + tokio
#              reference (bench/reference), at 16 and 64 connections,
#              alternating servers for $ROUNDS rounds (default 2)
#   footprint  stripped binary sizes, idle RSS, RSS after storing
#              1,000,000 short plants, GET /plants?limit=100 with them
#   durable    POST /plants in memory vs --data (sync always and never)
#   startup    start-up time with a journal of 1,000,000 plants
#   budgets    every budget of the spec, met or not, from the figures above
#
# Each wrk run lasts $DURATION (default 10s) after a 2 s warm-up. Figures
# drift by about 30% between runs on a small shared machine: compare rows
# of one run, as ratios. Loopback only; every server started is stopped.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-2}
TOKEN=bench
SECTIONS=("$@")
[ ${#SECTIONS[@]} -eq 0 ] && SECTIONS=(reference footprint durable startup budgets)

if ! command -v wrk >/dev/null; then
  echo "installing wrk" >&2
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO apt-get update -qq >&2 && $SUDO apt-get install -y -qq wrk >&2
fi
[ "$(ulimit -n)" -ge 4096 ] || ulimit -n 4096 2>/dev/null || true

# Every figure is of the binary as published (scripts/release-build.sh:
# std rebuilt without the backtrace symboliser); the size of a plain
# `cargo build --release` is reported beside it.
HOST=$(uname -m)-unknown-linux-gnu
scripts/release-build.sh "$HOST" >/dev/null
cargo build --release --quiet --bin plantstore --example make_journal
cargo build --release --quiet --manifest-path bench/reference/Cargo.toml
BIN=target/$HOST/release/plantstore
REFERENCE=bench/reference/target/release/plantstore-reference
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
# start_reference: the same for the reference server.
start_server() {
  free_port
  local started
  started=$(date +%s%N)
  PLANTSTORE_TOKEN=$TOKEN "$BIN" --addr "$ADDR" --log-level warn \
    --max-plants 100000000 "$@" 2>"$WORK/server.log" &
  SERVER_PID=$!
  wait_port "$started"
}

start_reference() {
  free_port
  local started
  started=$(date +%s%N)
  PLANTSTORE_TOKEN=$TOKEN "$REFERENCE" "$ADDR" 100000000 2>"$WORK/server.log" &
  SERVER_PID=$!
  wait_port "$started"
}

free_port() {
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  ADDR=127.0.0.1:$PORT
}

wait_port() {
  local started=$1 port=$PORT
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

# post CONNS [SCRIPT]: warm-up, then one wrk run; sets RPS, P50, P99 (ms)
# and ERRORS.
post() {
  local conns=$1 script=${2:-bench/post.lua} result
  PLANTSTORE_TOKEN=$TOKEN wrk -t2 -c"$conns" -d2s -s "$script" "http://$ADDR" >/dev/null
  result=$(PLANTSTORE_TOKEN=$TOKEN wrk -t2 -c"$conns" -d"$DURATION" -s "$script" \
    "http://$ADDR" | grep '^RESULT')
  read -r _ RPS P50 P99 ERRORS <<<"$result"
  P50=$(awk "BEGIN{printf \"%.2f\", $P50/1000}")
  P99=$(awk "BEGIN{printf \"%.2f\", $P99/1000}")
}

ratio() { awk "BEGIN{printf \"%.2f\", $1/$2}"; }
plants_stored() {
  curl -sf -H "Authorization: Bearer $TOKEN" "http://$ADDR/metrics" |
    awk '/^plantstore_plants /{print $2}'
}
rss_kib() { awk '/VmRSS/{print $2}' "/proc/$SERVER_PID/status"; }
# Sums of figures per server and connection count, for the budgets.
declare -A SUM

section_reference() {
  echo "## POST /plants in memory: plantstore vs axum + tokio (wrk -t2, $DURATION, $ROUNDS rounds)"
  echo
  echo "| round | connections | server | requests/s | p50 ms | p99 ms | errors | plantstore / reference |"
  echo "|---|---|---|---|---|---|---|---|"
  local round conns server ours
  for round in $(seq 1 "$ROUNDS"); do
    for conns in 16 64; do
      for server in plantstore reference; do
        if [ $server = plantstore ]; then start_server; else start_reference; fi
        post "$conns"
        stop_server
        SUM[$server.$conns.rps]=$(awk "BEGIN{print ${SUM[$server.$conns.rps]:-0} + $RPS}")
        SUM[$server.$conns.p99]=$(awk "BEGIN{print ${SUM[$server.$conns.p99]:-0} + $P99}")
        SUM[$server.$conns.errors]=$(( ${SUM[$server.$conns.errors]:-0} + ERRORS ))
        if [ $server = plantstore ]; then
          ours=$RPS
          echo "| $round | $conns | plantstore | $RPS | $P50 | $P99 | $ERRORS | |"
        else
          echo "| $round | $conns | reference | $RPS | $P50 | $P99 | $ERRORS | $(ratio "$ours" "$RPS") |"
        fi
      done
    done
  done
  echo
}

section_footprint() {
  echo "## Footprint"
  echo
  echo "| what | plantstore | reference |"
  echo "|---|---|---|"
  SIZE=$(stat -c %s "$BIN")
  echo "| stripped binary, bytes ($HOST, as published) | $SIZE | $(stat -c %s "$REFERENCE") |"
  echo "| stripped binary, bytes (plain cargo build --release) | $(stat -c %s target/release/plantstore) | |"
  local ref_idle
  start_reference; sleep 0.5; ref_idle=$(rss_kib); stop_server
  local run idle=()
  for run in 1 2 3; do
    start_server; sleep 0.5; idle+=("$(rss_kib)")
    [ $run = 3 ] || stop_server
  done
  IDLE=$(printf '%s\n' "${idle[@]}" | sort -n | tail -1)
  echo "| idle RSS, KiB (3 starts; the largest counts) | ${idle[*]} | $ref_idle |"
  # 1,000,000 short plants through the API, exactly.
  PLANTSTORE_TOKEN=$TOKEN PLANTS=1000000 THREADS=2 \
    wrk -t2 -c32 -d300s -s bench/load.lua "http://$ADDR" >/dev/null &
  local wrk_pid=$! stored=0 before=-1 extra=1000000
  for _ in $(seq 1 600); do
    sleep 0.5
    stored=$(plants_stored)
    [ "$stored" = "$before" ] && [ "$stored" -gt 0 ] && break
    before=$stored
  done
  kill "$wrk_pid" 2>/dev/null; wait "$wrk_pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    stored=$(plants_stored)
    [ "$stored" -lt 1000000 ] || break
    extra=$((extra + 1))
    curl -sf -o /dev/null -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
      -d "{\"id\":$extra,\"name\":\"plant $extra\"}" "http://$ADDR/plants"
  done
  LOADED=$(rss_kib)
  echo "| RSS with $stored plants stored, KiB | $LOADED | |"
  echo "| RSS growth for them, KiB | $((LOADED - IDLE)) | |"
  GET_PATH="/plants?limit=100" post 64 bench/get.lua
  echo "| GET /plants?limit=100 with $stored plants, 64 connections | $RPS req/s, p99 $P99 ms, $ERRORS errors | |"
  stop_server
  [ "$stored" = 1000000 ] || { echo "stored $stored plants, not 1000000" >&2; exit 1; }
  echo
}

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
      [ "$sync.$conns" = always.64 ] && DURABLE_RATIO=$(ratio "$RPS" "$mem")
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
    echo "| $run | $(stat -c %s "$journal") | $STARTUP_MS | $(rss_kib) |"
    [ "$STARTUP_MS" -gt "${STARTUP_MAX:-0}" ] && STARTUP_MAX=$STARTUP_MS
    stop_server
  done
  echo
}

# met CONDITION: "met" or "NOT met".
met() { if awk "BEGIN{exit !($1)}"; then echo met; else echo "**NOT met**"; fi; }

section_budgets() {
  echo "## Budgets (this run)"
  echo
  echo "| budget | measured | |"
  echo "|---|---|---|"
  local conns ours theirs p99 ref_p99
  for conns in 16 64; do
    [ -n "${SUM[plantstore.$conns.rps]:-}" ] || continue
    ours=${SUM[plantstore.$conns.rps]} theirs=${SUM[reference.$conns.rps]}
    p99=$(awk "BEGIN{printf \"%.2f\", ${SUM[plantstore.$conns.p99]}/$ROUNDS}")
    ref_p99=$(awk "BEGIN{printf \"%.2f\", ${SUM[reference.$conns.p99]}/$ROUNDS}")
    echo "| POST at $conns connections >= 1.0x reference (mean of rounds) | $(ratio "$ours" "$theirs")x | $(met "$ours >= $theirs") |"
    echo "| p99 at $conns connections <= reference's (mean of rounds) | $p99 vs $ref_p99 ms | $(met "$p99 <= $ref_p99") |"
  done
  if [ -n "${IDLE:-}" ]; then
    echo "| idle RSS <= 2048 KiB | $IDLE KiB | $(met "$IDLE <= 2048") |"
    echo "| 1,000,000 plants in <= 102400 KiB more | $((LOADED - IDLE)) KiB | $(met "$LOADED - $IDLE <= 102400") |"
    echo "| stripped binary <= 614400 bytes (x86_64) | $SIZE bytes | $(met "$SIZE <= 614400") |"
  fi
  [ -n "${DURABLE_RATIO:-}" ] &&
    echo "| --sync always at 64 connections >= 0.5x in memory | ${DURABLE_RATIO}x | $(met "$DURABLE_RATIO >= 0.5") |"
  [ -n "${STARTUP_MAX:-}" ] &&
    echo "| start-up with 1,000,000 plants < 1000 ms (slowest of 3) | $STARTUP_MAX ms | $(met "$STARTUP_MAX < 1000") |"
  echo
}

echo "# plantstore $(grep -m1 '^version' Cargo.toml | cut -d'"' -f2) benchmarks, $(nproc) cores, $(date -u +%Y-%m-%d)"
echo
for section in "${SECTIONS[@]}"; do
  "section_$section"
done
