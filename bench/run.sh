#!/usr/bin/env bash
# The benchmark suite: prints markdown tables of figures on stdout.
#
#   bench/run.sh [SECTION...]    (default: every section but postgres,
#                                 then the budgets)
#
#   reference  POST /plants in memory, plantstore vs the axum + tokio
#              reference (bench/reference), at 16 and 64 connections,
#              alternating servers for $ROUNDS rounds (default 2)
#   footprint  stripped binary sizes (the published builds of
#              scripts/release-build.sh, HTTPS and plain, and a plain
#              cargo build), idle RSS of each, in memory and with --data,
#              RSS after storing
#              $PLANTS short plants, GET /plants?limit=100 with them
#   durable    POST /plants in memory vs --data (sync always and never)
#   startup    start-up time with a journal of $PLANTS plants, and the
#              peak RSS during start-up against the RSS once started
#   restart    restart time after a torn tail of 1 MiB behind a journal of
#              1,000 plants, for each crafted tail: 00 00 08 00 repeated,
#              records with wrong checks, a megabyte-long name of planted
#              records torn by a kill -9, random bytes
#   writers    one writer loop (PUT /plants/{id}, wrk -c1) on a server
#              with $PLANTS plants (--data, --sync never), alone and
#              under 4 looping worst-case listings (one loop each, see
#              LISTINGS below), $ROUNDS rounds: the writer's p50, p99, max;
#              then the same with 256 KiB pages: 3,000 plants of 2,000-byte
#              names in memory (--max-name 65500), 4 loops of
#              GET /plants?limit=1000 (each page ends at its 256 KiB cap)
#   compaction a journal of $PLANTS plants, each written 3 times (so past
#              twice its live size), compacted by the server after one
#              change, $ROUNDS rounds: its longest store lock hold (from
#              its log), time, RSS before, at peak and after
#   export     GET /export of $PLANTS plants (a --data journal), $ROUNDS
#              rounds: time, plants/s, MB/s, RSS before and at peak
#              (polled); RSS with 20 clients that ask for it and never
#              read; then the export as the --seed of a new server: its
#              start-up time, RSS, and whether its export is the same
#   pinned     one core each: the server on CPU 0, wrk on CPU 1; POST
#              /plants at 16, 64 and 1024 connections, plantstore (with
#              $PINNED_ARGS, default "--threads 1"; a token file of the
#              write token and a read token, and the auth-failure limit
#              on, its table not empty: see start_pinned) vs the reference
#              vs nginx answering a canned 200 (one worker), $ROUNDS rounds:
#              req/s, p50, p99, errors, server CPU and context switches
#              per request; then RSS with $IDLE_CONNS (default 10000) idle
#              keep-alive connections open (bench/hold.py) and a fresh
#              client's latency meanwhile
#   https      one core each (server on CPU 0, clients on CPU 1), the same
#              certificate: plantstore over TLS vs nginx with TLS 1.3 in
#              front of a canned 200: keep-alive POST at 64 connections
#              (wrk over https), new TLS 1.3 connections per second with
#              full handshakes and with session resumption (4 openssl
#              s_time clients), server CPU per request and per connection,
#              $ROUNDS rounds; then what $TLS_IDLE (default 1000) idle TLS
#              connections add to plantstore's RSS (bench/hold_tls.py)
#   feed       the change feed (examples/feed_load, a native reader): POST
#              at 64 connections without subscribers, with 100 idle ones
#              (following a tag the POSTs do not carry) and with 100
#              receiving every change, $ROUNDS rounds; RSS per subscriber with 1,000 open; then 100
#              subscribers at 5,000 creates/s and 1,000 at 500/s for
#              $FEED_SECONDS s (default 5): whether each got every event in
#              order, the delay from a create's answer to its event, and
#              the feed's server CPU per delivered event
#   query      (bench/query.sh) $PLANTS plants with short names (one in
#              10,000 with the word fern), the memory store: p99 of the
#              first page in id order (for comparison) and in name order
#              (?sort=name&limit=100), of pages after random plants
#              (bench/name_page.lua) and of the first page of ?q=fern,
#              one connection; the writer loop of the
#              writers section alone and under 4 loops of that search,
#              $ROUNDS rounds; what the name order costs a plant: private
#              memory of the new build less OLD's on the same journal, or
#              without OLD the store's own unit measurement. With
#              PLANTSTORE_TEST_DATABASE, the same pages and search on the
#              postgres build, seeded with the same plants
#   budgets    every budget of the spec, met or not, from the figures above
#   postgres   (only when named; run it through scripts/with-postgres.sh,
#              which sets PLANTSTORE_TEST_DATABASE) POST /plants, then GET
#              /plants?limit=100, at $PG_CONNS connections (default 64):
#              in memory, --data --sync always, and the postgres build with
#              --database, one instance and two behind nginx
#              (contrib/nginx-plantstore.conf); each instance on its own CPU
#              where there are 4 or more; $ROUNDS rounds, each with pgbench
#              running plantstore's own single-row INSERT at the same
#              connections on the same cluster, and a one-connection POST
#              run of the PostgreSQL instance. CPU seconds of each process
#              over the POST runs (per request and per stored plant),
#              PostgreSQL's commit time on one connection ($COMMITS
#              autocommit INSERTs, default 1000), and how long /healthz
#              takes to turn 503 and back when PostgreSQL is stopped and
#              started, and frozen (SIGSTOP) and thawed. $PG_ARGS: more
#              flags for the --database instances (e.g. "--database-pool
#              16")
#
# Each wrk run lasts $DURATION (default 10s) after a 2 s warm-up. Figures
# drift by about 30% between runs on a small shared machine: compare rows
# of one run, as ratios. Loopback only; every process started is stopped.
# $PLANTS (default 1000000) scales the sections that store many plants
# down for a quick check (PLANTS=100000); budgets stated for 1,000,000
# plants are then reported but not judged.
#
# OLD compares a change in one run instead of across two (whose figures
# drift): OLD=PATH names an earlier plantstore binary, OLD=REV a git
# revision, first built by bench/build-old.sh (target/old-COMMIT/):
#
#   OLD=HEAD~1 bench/run.sh pinned
#   OLD=$(bench/build-old.sh HEAD~5) DURATION=5s ROUNDS=3 bench/run.sh pinned
#
# The pinned section then runs, for each round and connection count, the
# old binary and then the new one, same conditions and flags (the old one
# gets $PINNED_ARGS too, so it must know them), in place of plantstore,
# the reference and nginx; prints both binaries' sizes, and after its
# rounds a table of old vs new per row with the new/old ratio of
# requests/s, p99 and server CPU per request (above 1: more requests/s, a
# longer p99, more CPU); its idle-connections part runs old and new. The
# query section measures the old binary's private memory on its journal
# (OLD=REV bench/run.sh query); the other sections ignore OLD, and the
# budgets skip the pinned rows (they are judged against the reference).
# Without OLD nothing changes. OLD=HEAD (with nothing changed since) shows
# how far two runs of one build differ.
set -euo pipefail
# OLD as a path is taken from where the script was started.
[ -z "${OLD:-}" ] || [ ! -e "$OLD" ] || OLD=$(realpath "$OLD")
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-2}
TOKEN=bench
# Flags plantstore gets in the pinned section (PINNED_ARGS= for none).
PINNED_ARGS=${PINNED_ARGS-"--threads 1"}
IDLE_CONNS=${IDLE_CONNS:-10000}
FEED_SECONDS=${FEED_SECONDS:-5}
PLANTS=${PLANTS:-1000000}
# The worst listings a writer can meet, one client loop each (the writers
# section; LISTINGS="PATH..." to choose others). Each is the costliest
# case of one way a page is read: the largest page (limit=1000, the most
# plants copied under shard locks and encoded); the largest page of a
# common tag (tag=bench, every 10th plant: each id found in the tag index
# is then looked up in the map: dearer than limit=1000, here by 1.5x); a tag
# one plant in 100,000 carries (without a tag index, a scan of every plant
# under the locks; with it, nearly free; an absent tag, tag=nope, is the
# same case and cheaper still); a cursor near the end (a walk that started
# from the first id instead of the cursor would read the whole store).
WORST="/plants?limit=1000 /plants?tag=bench&limit=1000 /plants?tag=rare&limit=1000"
WORST+=" /plants?after=$((PLANTS - 1001))&limit=1000"
read -ra LISTINGS <<<"${LISTINGS:-$WORST}"
SECTIONS=("$@")
[ ${#SECTIONS[@]} -eq 0 ] &&
  SECTIONS=(reference footprint durable startup restart writers compaction export pinned https feed query budgets)

if [[ " ${SECTIONS[*]} " == *" postgres "* ]] && [ -z "${PLANTSTORE_TEST_DATABASE:-}" ]; then
  echo "the postgres section needs PLANTSTORE_TEST_DATABASE: run it through scripts/with-postgres.sh" >&2
  exit 2
fi

if ! command -v wrk >/dev/null; then
  echo "installing wrk" >&2
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO apt-get update -qq >&2 && $SUDO apt-get install -y -qq wrk >&2
fi
[ "$(ulimit -n)" -ge 4096 ] || ulimit -n 4096 2>/dev/null || true

# The earlier build the pinned and query sections compare with (OLD), if any.
OLD_BIN=
if [ -n "${OLD:-}" ] && [[ " ${SECTIONS[*]} " =~ " "(pinned|query)" " ]]; then
  if [ -f "$OLD" ] && [ -x "$OLD" ]; then
    OLD_BIN=$OLD
  elif git rev-parse --verify --quiet "$OLD^{commit}" >/dev/null; then
    OLD_BIN=$(bench/build-old.sh "$OLD")
  else
    echo "OLD=$OLD is neither an executable file nor a git revision" >&2
    exit 2
  fi
fi

# Every figure is of the binary as published (scripts/release-build.sh:
# std rebuilt without the backtrace symboliser), the default build (it
# serves HTTPS too; plain HTTP unless given a certificate); the size of a
# plain `cargo build --release` is reported beside it, and the footprint
# section measures the plain build (FEATURES=plain: HTTP only) as well.
HOST=$(uname -m)-unknown-linux-gnu
scripts/release-build.sh "$HOST" >/dev/null
PLAIN_BIN=target/plain/$HOST/release/plantstore
if [[ " ${SECTIONS[*]} " == *" footprint "* ]]; then
  FEATURES=plain scripts/release-build.sh "$HOST" >/dev/null
fi
cargo build --release --quiet --bin plantstore --example make_journal --example feed_load
cargo build --release --quiet --manifest-path bench/reference/Cargo.toml
BIN=target/$HOST/release/plantstore
# The postgres build (--database), as published: only for that section,
# and for the query section's PostgreSQL part.
PG_BIN=
if [[ " ${SECTIONS[*]} " == *" postgres "* ]] ||
  { [[ " ${SECTIONS[*]} " == *" query "* ]] && [ -n "${PLANTSTORE_TEST_DATABASE:-}" ]; }; then
  FEATURES=postgres scripts/release-build.sh "$HOST" >/dev/null
  PG_BIN=target/postgres/$HOST/release/plantstore
fi
REFERENCE=bench/reference/target/release/plantstore-reference
WORK=$(mktemp -d)
SERVER_PID=
HOLD_PID=
# Client loops running in the background (the writers section).
LOAD_PIDS=()
# A command prefix for the servers started (the pinned section: taskset).
PIN=()
# Processes started beside SERVER_PID (the postgres section: its
# instances and nginx).
EXTRA_PIDS=()
# Under set -e a failing `wait` (the status of a killed process) would end
# the trap early, so every step here is allowed to fail.
cleanup() {
  local pid
  for pid in "${LOAD_PIDS[@]}" "${EXTRA_PIDS[@]}" $HOLD_PID $SERVER_PID; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

# start_server ARGS...: starts plantstore on a free loopback port (access
# log off: it would cost the server CPU; LOG_LEVEL=info turns it and the
# other info lines on); sets SERVER_PID, ADDR and STARTUP_MS (spawn until
# the port accepts a connection).
# start_reference: the same for the reference server. Both run under
# ${PIN[@]} when set.
start_server() {
  free_port
  local started
  started=$(date +%s%N)
  PLANTSTORE_TOKEN=$TOKEN "${PIN[@]}" "$BIN" --addr "$ADDR" --log-level "${LOG_LEVEL:-warn}" \
    --max-plants 100000000 "$@" 2>"$WORK/server.log" &
  SERVER_PID=$!
  wait_port "$started"
}

start_reference() {
  free_port
  local started
  started=$(date +%s%N)
  PLANTSTORE_TOKEN=$TOKEN "${PIN[@]}" "$REFERENCE" "$ADDR" 100000000 2>"$WORK/server.log" &
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

# post CONNS [SCRIPT]: warm-up, then one wrk run; sets RPS, P50, P99 (ms),
# ERRORS and REQUESTS. With MEASURE set (a command), `$MEASURE start` and
# `$MEASURE stop` run just before and after the measured run.
post() {
  local conns=$1 script=${2:-bench/post.lua} result threads=2
  [ "$conns" -ge 2 ] || threads=1
  PLANTSTORE_TOKEN=$TOKEN wrk -t$threads -c"$conns" -d2s -s "$script" "http://$ADDR" >/dev/null
  [ -z "${MEASURE:-}" ] || $MEASURE start
  result=$(PLANTSTORE_TOKEN=$TOKEN wrk -t$threads -c"$conns" -d"$DURATION" -s "$script" \
    "http://$ADDR" | grep '^RESULT')
  [ -z "${MEASURE:-}" ] || $MEASURE stop
  read -r _ RPS P50 P99 ERRORS REQUESTS MAX <<<"$result"
  P50=$(awk "BEGIN{printf \"%.2f\", $P50/1000}")
  P99=$(awk "BEGIN{printf \"%.2f\", $P99/1000}")
}

ratio() { awk "BEGIN{if ($2 == 0) print \"-\"; else printf \"%.2f\", $1/$2}"; }
# add KEY VALUE: SUM[KEY] += VALUE.
add() { SUM[$1]=$(awk "BEGIN{print ${SUM[$1]:-0} + $2}"); }
mean() { awk "BEGIN{printf \"%.${2:-2}f\", ${SUM[$1]}/$ROUNDS}"; }
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
  SIZE=$(stat -c %s "$PLAIN_BIN")
  HTTPS_SIZE=$(stat -c %s "$BIN")
  echo "| published plain build, HTTP only ($PLAIN_BIN: FEATURES=plain scripts/release-build.sh $HOST, stripped), bytes | $SIZE | $(stat -c %s "$REFERENCE") |"
  echo "| published HTTPS build, the default ($BIN: scripts/release-build.sh $HOST, stripped), bytes | $HTTPS_SIZE | |"
  echo "| stripped binary, bytes (plain cargo build --release, the default features) | $(stat -c %s target/release/plantstore) | |"
  local ref_idle
  start_reference; sleep 0.5; ref_idle=$(rss_kib); stop_server
  # Idle RSS as ps reports it (VmRSS), default flags: with --data (a new
  # journal) and in memory; the last in-memory start goes on below.
  local run idle=() idle_data=()
  for run in 1 2 3; do
    rm -f "$WORK/idle.journal"
    start_server --data "$WORK/idle.journal"; sleep 0.5; idle_data+=("$(rss_kib)")
    stop_server
  done
  rm -f "$WORK/idle.journal"
  # The static build (scripts/release-build.sh $STATIC_TARGET), when built:
  # no shared library mapped in, so its RSS is the process's own.
  STATIC_TARGET=${STATIC_TARGET:-$(uname -m)-unknown-linux-musl}
  local static_bin=target/$STATIC_TARGET/release/plantstore main_bin=$BIN
  IDLE_STATIC=
  if [ -x "$static_bin" ]; then
    BIN=$static_bin
    start_server; sleep 0.5; IDLE_STATIC=$(rss_kib); stop_server
    BIN=$main_bin
  fi
  BIN=$PLAIN_BIN
  start_server; sleep 0.5; IDLE_PLAIN=$(rss_kib); stop_server
  BIN=$main_bin
  for run in 1 2 3; do
    start_server; sleep 0.5; idle+=("$(rss_kib)")
    [ $run = 3 ] || stop_server
  done
  IDLE=$(printf '%s\n' "${idle[@]}" | sort -n | tail -1)
  IDLE_DATA=$(printf '%s\n' "${idle_data[@]}" | sort -n | tail -1)
  echo "| idle RSS, KiB (3 starts; the largest counts) | ${idle[*]} | $ref_idle |"
  # What that RSS is made of: the process's own memory (anonymous pages)
  # and pages of files mapped in (the binary, and for a dynamic build the
  # C library and loader, shared with every process using them). sleep(1)
  # shows the floor of a dynamically linked glibc program.
  IDLE_ANON=$(awk '/RssAnon/{print $2}' "/proc/$SERVER_PID/status")
  echo "| of the last: private (RssAnon) / mapped files (RssFile), KiB | $IDLE_ANON / $(awk '/RssFile/{print $2}' "/proc/$SERVER_PID/status") | |"
  local floor
  sleep 5 & floor=$!; sleep 0.3
  echo "| a dynamically linked C program's floor: sleep(1)'s RSS, KiB | $(awk '/VmRSS/{print $2}' "/proc/$floor/status") | |"
  kill "$floor"; wait "$floor" 2>/dev/null || true
  [ -z "$IDLE_STATIC" ] ||
    echo "| idle RSS of the static build ($static_bin, $(stat -c %s "$static_bin") bytes), KiB | $IDLE_STATIC | |"
  echo "| idle RSS with --data (a new journal), KiB (3 starts; the largest counts) | ${idle_data[*]} | |"
  echo "| idle RSS of the plain build, KiB | $IDLE_PLAIN | |"
  # $PLANTS short plants through the API, exactly.
  PLANTSTORE_TOKEN=$TOKEN PLANTS=$PLANTS THREADS=2 \
    wrk -t2 -c32 -d300s -s bench/load.lua "http://$ADDR" >/dev/null &
  local wrk_pid=$! stored=0 before=-1 extra=$PLANTS
  for _ in $(seq 1 600); do
    sleep 0.5
    stored=$(plants_stored)
    [ "$stored" = "$before" ] && [ "$stored" -gt 0 ] && break
    before=$stored
  done
  kill "$wrk_pid" 2>/dev/null; wait "$wrk_pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    stored=$(plants_stored)
    [ "$stored" -lt "$PLANTS" ] || break
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
  [ "$stored" = "$PLANTS" ] || { echo "stored $stored plants, not $PLANTS" >&2; exit 1; }
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
  echo "## Start-up with a journal of $PLANTS plants"
  echo
  local journal=$WORK/startup.journal
  target/release/examples/make_journal "$journal" "$PLANTS"
  echo "| run | journal bytes | spawn to accepting ms | peak RSS during start-up KiB | RSS after start KiB | peak - after KiB |"
  echo "|---|---|---|---|---|---|"
  local run peak after
  for run in 1 2 3; do
    start_server --data "$journal"
    peak=$(peak_rss_kib) after=$(rss_kib)
    echo "| $run | $(stat -c %s "$journal") | $STARTUP_MS | $peak | $after | $((peak - after)) |"
    [ "$STARTUP_MS" -gt "${STARTUP_MAX:-0}" ] && STARTUP_MAX=$STARTUP_MS
    [ "$((peak - after))" -gt "${STARTUP_PEAK_OVER:--1}" ] && STARTUP_PEAK_OVER=$((peak - after))
    stop_server
  done
  echo
}

# tail_bytes KIND FILE: appends a crafted torn tail of 1 MiB to FILE.
tail_bytes() {
  python3 - "$1" "$2" <<'PY'
import os, sys
kind, path = sys.argv[1], sys.argv[2]
mib = 1 << 20
if kind == "zeros0800":
    tail = bytes([0, 0, 8, 0]) * (mib // 4)
elif kind == "wrong-checks":
    # Version-3 records of a put, with checks that are not this file's.
    payload = b"\x01" + (5).to_bytes(8, "little") + (1).to_bytes(4, "little") + b"x" + (0xFFFFFFFF).to_bytes(4, "little")
    record = len(payload).to_bytes(4, "little") + os.urandom(12) + payload
    tail = (record * (mib // len(record) + 1))[:mib]
else:
    tail = os.urandom(mib)
with open(path, "ab") as f:
    f.write(tail)
PY
}

# A megabyte-long name of delete records shaped as version 3 writes them,
# checks made of letters: what a client can send, as JSON.
planted_body() {
  python3 -c '
import json
record = b"\x09\x00\x00\x00" + b"AAAA" + b"BBBBBBBB" + b"\x02" + b"12345678"
name = (record * ((1 << 20) // len(record))).decode()
print(json.dumps({"id": 1000001, "name": name}))'
}

section_restart() {
  echo "## Restart after a torn tail of 1 MiB (behind 1,000 plants)"
  echo
  local journal=$WORK/restart.journal base=$WORK/restart.base kind run ms=()
  local limits=(--max-body 16777216 --max-name 2000000)
  target/release/examples/make_journal "$base" 1000
  echo "| tail | journal bytes | spawn to accepting ms (3 runs) | torn bytes cut |"
  echo "|---|---|---|---|"
  for kind in none zeros0800 wrong-checks planted-name random; do
    ms=()
    for run in 1 2 3; do
      cp "$base" "$journal"
      case $kind in
        none) ;;
        planted-name)
          start_server --data "$journal" "${limits[@]}"
          planted_body >"$WORK/planted.json"
          curl -sf -o /dev/null -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
            --data-binary @"$WORK/planted.json" "http://$ADDR/plants"
          kill -9 "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=
          truncate -s -100 "$journal" ;;
        *) tail_bytes "$kind" "$journal" ;;
      esac
      local bytes
      bytes=$(stat -c %s "$journal")
      LOG_LEVEL=info start_server --data "$journal" "${limits[@]}"
      ms+=("$STARTUP_MS")
      stop_server
    done
    local cut
    cut=$(grep -o 'cut off a torn final record ([0-9]* bytes)' "$WORK/server.log" | grep -o '[0-9]*' || echo 0)
    echo "| $kind | $bytes | ${ms[*]} | $cut |"
    local slowest
    slowest=$(printf '%s\n' "${ms[@]}" | sort -n | tail -1)
    [ "$kind" = none ] || [ "$slowest" -le "${RESTART_MAX:-0}" ] || RESTART_MAX=$slowest
  done
  echo
}

# peak_rss_while PID: the largest RSS of the server (KiB) seen while PID
# runs, polled every 10 ms.
peak_rss_while() {
  local peak=0 rss
  while kill -0 "$1" 2>/dev/null; do
    rss=$(rss_kib)
    [ "$rss" -gt "$peak" ] && peak=$rss
    sleep 0.01
  done
  echo "$peak"
}

section_export() {
  echo "## GET /export of $PLANTS plants"
  echo
  local journal=$WORK/export.journal out=$WORK/export.ndjson
  target/release/examples/make_journal "$journal" "$PLANTS"
  start_server --data "$journal"
  local before run started ns peak bytes
  before=$(rss_kib)
  echo "| run | seconds | plants/s | MB/s | RSS before KiB | peak RSS during KiB |"
  echo "|---|---|---|---|---|---|"
  for run in $(seq 1 "$ROUNDS"); do
    started=$(date +%s%N)
    curl -sf -H "Authorization: Bearer $TOKEN" "http://$ADDR/export" -o "$out" &
    peak=$(peak_rss_while $!)
    wait $! || { echo "export failed" >&2; exit 1; }
    ns=$(($(date +%s%N) - started))
    bytes=$(stat -c %s "$out")
    [ "$(wc -l <"$out")" -eq "$PLANTS" ] || { echo "export lost plants" >&2; exit 1; }
    echo "| $run | $(awk "BEGIN{printf \"%.3f\", $ns/1e9}") |" \
      "$(awk "BEGIN{printf \"%.0f\", $PLANTS/($ns/1e9)}") |" \
      "$(awk "BEGIN{printf \"%.0f\", $bytes/1e6/($ns/1e9)}") | $before | $peak |"
  done
  echo
  # Twenty clients ask and never read: each holds what its socket buffers
  # take plus one piece.
  python3 - "$PORT" "$TOKEN" <<'PY' &
import socket, sys, time
port, token = int(sys.argv[1]), sys.argv[2]
held = []
for _ in range(20):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(f"GET /export HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    held.append(s)
time.sleep(3)
PY
  local stalled=$!
  sleep 2
  echo "20 clients asking for the export and not reading: RSS $(rss_kib) KiB" \
    "(idle with the plants: $before KiB; export size $(stat -c %s "$out") bytes)."
  wait "$stalled" || true
  stop_server
  # The export is a valid --seed file: a new server starts from it.
  start_server --seed "$out"
  echo "A new server with --seed of that export: accepting after $STARTUP_MS ms, RSS $(rss_kib) KiB."
  curl -sf -H "Authorization: Bearer $TOKEN" "http://$ADDR/export" -o "$WORK/again.ndjson"
  if cmp -s "$out" "$WORK/again.ndjson"; then
    echo "Its export is byte for byte the same."
  else
    echo "Its export differs." >&2
    exit 1
  fi
  stop_server
  echo
}

# ms MICROSECONDS: milliseconds, three decimals.
ms() { awk "BEGIN{printf \"%.3f\", $1/1000}"; }

# seconds DURATION: a wrk duration (10, 10s, 2m) in whole seconds.
seconds() {
  case $1 in
    *m) echo $((${1%m} * 60)) ;;
    *s) echo "${1%s}" ;;
    *) echo "$1" ;;
  esac
}

# writer_run: one writer loop (wrk -t1 -c1, bench/put.lua), a 2 s
# warm-up, then $DURATION measured; sets RPS, P50, P99, MAX (ms) and
# ERRORS.
writer_run() {
  local result
  PLANTSTORE_TOKEN=$TOKEN PLANTS=$PLANTS wrk -t1 -c1 -d2s -s bench/put.lua \
    "http://$ADDR" >/dev/null
  result=$(PLANTSTORE_TOKEN=$TOKEN PLANTS=$PLANTS wrk -t1 -c1 -d"$DURATION" \
    -s bench/put.lua "http://$ADDR" | grep '^RESULT')
  read -r _ RPS P50 P99 ERRORS REQUESTS MAX <<<"$result"
  P50=$(ms "$P50") P99=$(ms "$P99") MAX=$(ms "$MAX")
}

# writer_under OUT PATH...: writer_run while one listing loop per PATH
# (wrk -t1 -c1, bench/get.lua) runs, started 2 s before the writer's
# warm-up and lasting past its end; loop I's output (from 0) goes to OUT.I.
writer_under() {
  local out=$1 secs i pid
  shift
  local paths=("$@")
  secs=$(($(seconds "$DURATION") + 5))
  LOAD_PIDS=()
  for i in "${!paths[@]}"; do
    PLANTSTORE_TOKEN=$TOKEN GET_PATH=${paths[$i]} wrk -t1 -c1 -d"${secs}s" \
      -s bench/get.lua "http://$ADDR" >"$out.$i" &
    LOAD_PIDS+=($!)
  done
  sleep 2
  writer_run
  for pid in "${LOAD_PIDS[@]}"; do wait "$pid" || true; done
  LOAD_PIDS=()
}

section_writers() {
  echo "## Writers under looping worst-case listings ($PLANTS plants, --data, --sync never; $DURATION, $ROUNDS rounds)"
  echo
  local journal=$WORK/writers.journal
  target/release/examples/make_journal "$journal" "$PLANTS" --rare 100000
  # --compact-min: no compaction while measuring (the writer's records
  # would take a small store's journal past twice its size).
  start_server --data "$journal" --sync never --compact-min 1000000000000
  local rare listing
  rare=$(curl -sf -H "Authorization: Bearer $TOKEN" "http://$ADDR/plants?tag=rare&limit=1000" |
    grep -o '"id"' | wc -l)
  echo "One writer loop: \`PUT /plants/{id}\` over untagged plants, one connection"
  echo "(wrk -t1 -c1, bench/put.lua). Listing load: one loop (wrk -t1 -c1) on each of"
  for listing in "${LISTINGS[@]}"; do printf '%s ' "\`$listing\`"; done
  echo "(plants with tag rare: $rare), started 2 s before the writer's warm-up."
  echo
  echo "| round | writer | requests/s | p50 ms | p99 ms | max ms | errors | p99 / alone |"
  echo "|---|---|---|---|---|---|---|---|"
  local round alone_p99 i
  for round in $(seq 1 "$ROUNDS"); do
    writer_run
    alone_p99=$P99
    add writers.alone.p99 "$P99"
    echo "| $round | alone | $RPS | $P50 | $P99 | $MAX | $ERRORS | 1.00 |"
    writer_under "$WORK/listing.$round" "${LISTINGS[@]}"
    add writers.loaded.p99 "$P99"
    WRITERS_MAX=$(awk "BEGIN{print ($MAX > ${WRITERS_MAX:-0}) ? $MAX : ${WRITERS_MAX:-0}}")
    echo "| $round | under 4 listing loops | $RPS | $P50 | $P99 | $MAX | $ERRORS | $(ratio "$P99" "$alone_p99") |"
  done
  stop_server
  echo
  echo "The listing loops meanwhile (each over its whole run, warm-ups included):"
  echo
  echo "| round | listing | requests/s | p50 ms | p99 ms | max ms | errors |"
  echo "|---|---|---|---|---|---|---|"
  for round in $(seq 1 "$ROUNDS"); do
    for i in "${!LISTINGS[@]}"; do
      listing=$(grep '^RESULT' "$WORK/listing.$round.$i" || echo "RESULT 0 0 0 0 0 0")
      read -r _ RPS P50 P99 ERRORS REQUESTS MAX <<<"$listing"
      echo "| $round | \`${LISTINGS[$i]}\` | $RPS | $(ms "$P50") | $(ms "$P99") | $(ms "$MAX") | $ERRORS |"
    done
  done
  echo
  writers_large_pages
}

# The writer under 4 loops of 256 KiB pages (names of 2,000 bytes: each
# page ends at its byte cap, some 128 plants).
writers_large_pages() {
  echo "### Under 4 loops of 256 KiB pages (3,000 plants with 2,000-byte names, in memory; $DURATION, $ROUNDS rounds)"
  echo
  start_server --max-name 65500 --max-body 1048576
  python3 - "$ADDR" "$TOKEN" <<'PY'
import http.client, json, sys
host, port = sys.argv[1].rsplit(":", 1)
client = http.client.HTTPConnection(host, int(port))
head = {"Authorization": "Bearer " + sys.argv[2], "Content-Type": "application/json"}
for i in range(3000):
    client.request("POST", "/plants", json.dumps({"id": i, "name": "n" * 2000 + str(i)}), head)
    reply = client.getresponse()
    reply.read()
    assert reply.status == 200, reply.status
PY
  local page round big="/plants?limit=1000"
  page=$(curl -sf -H "Authorization: Bearer $TOKEN" "http://$ADDR$big" | wc -c)
  echo "One page: $page bytes. Writer: \`PUT /plants/{id}\` (wrk -t1 -c1, bench/put.lua)."
  echo
  echo "| round | writer | requests/s | p50 ms | p99 ms | max ms | errors |"
  echo "|---|---|---|---|---|---|---|"
  for round in $(seq 1 "$ROUNDS"); do
    PLANTS=3000 writer_under "$WORK/large.$round" "$big" "$big" "$big" "$big"
    add writers.large.p99 "$P99"
    echo "| $round | under 4 loops of 256 KiB pages | $RPS | $P50 | $P99 | $MAX | $ERRORS |"
  done
  stop_server
  echo
}

# peak_rss_kib: the server's peak RSS since start, or since the last
# `echo 5 > /proc/PID/clear_refs`.
peak_rss_kib() { awk '/VmHWM/{print $2}' "/proc/$SERVER_PID/status"; }

# compact_once JOURNAL: starts the server on JOURNAL (past twice its live
# size), makes one change so that it compacts, waits for its log line and
# stops it; sets COMPACT_BYTES, COMPACT_MS and COMPACT_HOLD_US (from that
# line), RSS_BEFORE, RSS_PEAK (while compacting) and RSS_AFTER, in KiB.
compact_once() {
  local line sampled=0 rss waited=0 hwm=yes
  # Info level for the compaction's log line (and the access line of the
  # one request below).
  LOG_LEVEL=info start_server --data "$1"
  sleep 0.5
  RSS_BEFORE=$(rss_kib)
  # Reset the peak (start-up read the whole file into memory); where that
  # is refused, the peak is the largest of the samples taken below.
  { echo 5 >"/proc/$SERVER_PID/clear_refs"; } 2>/dev/null || hwm=
  # Any change checks the journal's size: this one starts the compaction.
  curl -sf -o /dev/null -X PUT -H "Authorization: Bearer $TOKEN" \
    -H 'Content-Type: application/json' -d '{"name":"plant 1"}' "http://$ADDR/plants/1"
  until line=$(grep -m1 'journal compacted to' "$WORK/server.log"); do
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log" >&2; exit 1; }
    rss=$(rss_kib)
    [ "$rss" -le "$sampled" ] || sampled=$rss
    waited=$((waited + 1))
    [ "$waited" -lt 6000 ] || { echo "no compaction logged in 120 s" >&2; exit 1; }
    sleep 0.02
  done
  RSS_PEAK=$sampled
  if [ -n "$hwm" ]; then
    rss=$(peak_rss_kib)
    [ "$rss" -le "$RSS_PEAK" ] || RSS_PEAK=$rss
  fi
  RSS_AFTER=$(rss_kib)
  stop_server
  # "journal compacted to N bytes in M ms (longest store lock hold K µs)"
  read -r COMPACT_BYTES COMPACT_MS COMPACT_HOLD_US <<<"$(sed -n \
    's/.*compacted to \([0-9]*\) bytes in \([0-9]*\) ms (longest store lock hold \([0-9]*\) .*/\1 \2 \3/p' \
    <<<"$line")"
  [ -n "$COMPACT_HOLD_US" ] || { echo "unexpected compaction log line: $line" >&2; exit 1; }
}

section_compaction() {
  echo "## Compaction of a journal of $PLANTS plants ($ROUNDS rounds)"
  echo
  local source=$WORK/compaction.source journal=$WORK/compaction.journal round
  target/release/examples/make_journal "$source" "$PLANTS" --rewrites 2
  echo "make_journal --rewrites 2 (each plant written 3 times); each round starts the"
  echo "server (--data, --sync always) on a fresh copy, and one \`PUT /plants/1\` starts"
  echo "the compaction. The lock hold is the server's own figure: the longest step's"
  echo "wall time, so a step preempted by anything else on the machine counts whole."
  echo
  echo "| round | journal bytes | compacted to | compaction ms | longest store lock hold µs | RSS before KiB | peak RSS while compacting KiB | RSS after KiB |"
  echo "|---|---|---|---|---|---|---|---|"
  COMPACT_HOLDS=() COMPACT_PEAK_GROWTH=0
  for round in $(seq 1 "$ROUNDS"); do
    cp "$source" "$journal"
    compact_once "$journal"
    COMPACT_HOLDS+=("$COMPACT_HOLD_US")
    [ $((RSS_PEAK - RSS_BEFORE)) -le "$COMPACT_PEAK_GROWTH" ] ||
      COMPACT_PEAK_GROWTH=$((RSS_PEAK - RSS_BEFORE))
    echo "| $round | $(stat -c %s "$source") | $COMPACT_BYTES | $COMPACT_MS | $COMPACT_HOLD_US | $RSS_BEFORE | $RSS_PEAK | $RSS_AFTER |"
  done
  echo
}

# The pinned section's helpers.
# start_pinned SERVER [FLAGS...]: starts plantstore (with $PINNED_ARGS and
# FLAGS), the old plantstore (the same way), the reference or nginx on
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
  if [[ $server == plantstore || $server == old ]] && scoped "$bin"; then
    args+=(--token-file "$WORK/tokens")
  fi
  PIN=(taskset -c 0)
  case $server in
    plantstore) start_server "${args[@]}" "$@" ;;
    # start_server runs $BIN: this one, for the call it makes.
    old) local BIN=$OLD_BIN && start_server "${args[@]}" "$@" ;;
    reference) start_reference ;;
    nginx) start_nginx ;;
    nginx-tls) start_nginx tls ;;
  esac
  PIN=()
  if [[ $server == plantstore || $server == old ]]; then
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
# request), both over the measured run only.
pinned_run() {
  local conns=$1 ticks switches result
  PLANTSTORE_TOKEN=$TOKEN taskset -c 1 wrk -t1 -c"$conns" -d2s -s bench/post.lua \
    "${SCHEME:-http}://$ADDR" >/dev/null
  ctx_switches "$WORK/ctx.before"
  ticks=$(cpu_ticks)
  result=$(PLANTSTORE_TOKEN=$TOKEN taskset -c 1 wrk -t1 -c"$conns" -d"$DURATION" \
    -s bench/post.lua "${SCHEME:-http}://$ADDR" | grep '^RESULT')
  ticks=$(($(cpu_ticks) - ticks))
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

# label SERVER: the pinned section's name for a server: old and new when
# OLD is set.
label() {
  case $1 in
    old) echo old ;;
    plantstore) if [ -n "$OLD_BIN" ]; then echo new; else echo plantstore; fi ;;
    *) echo "$1" ;;
  esac
}

# describe_binaries: the old and new binaries, their sizes and the ratio.
describe_binaries() {
  local old new rev same=
  old=$(stat -c %s "$OLD_BIN") new=$(stat -c %s "$BIN")
  rev=$(git describe --always --dirty 2>/dev/null || echo "?")
  cmp -s "$OLD_BIN" "$BIN" && same=" (the same bytes)"
  echo "Binaries: old \`$(realpath --relative-base=. "$OLD_BIN")\` $old bytes;"
  echo "new \`$BIN\` ($rev) $new bytes; new/old size $(ratio "$new" "$old")$same."
}

# compare_table: old vs new, one row per round and connection count from
# PAIR, then (over 2 rounds or more) their means, each with its new/old
# ratios.
compare_table() {
  local round conns figure places o n row rows
  mapfile -t rows < <(seq 1 "$ROUNDS")
  [ "$ROUNDS" -eq 1 ] || rows+=(mean)
  echo "## Old vs new: POST /plants on one core each, new/old per row"
  echo
  echo "Above 1: more requests/s, a longer p99, more server CPU per request."
  echo
  echo "| round | connections | old requests/s | new requests/s | new/old | old p99 ms | new p99 ms | new/old | old CPU µs/request | new CPU µs/request | new/old |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  for round in "${rows[@]}"; do
    for conns in 16 64 1024; do
      row="| $round | $conns |"
      for figure in rps:0 p99:3 cpu:1; do
        places=${figure#*:} figure=${figure%:*}
        if [ "$round" = mean ]; then
          o=$(mean "pinned.old.$conns.$figure" "$places")
          n=$(mean "pinned.plantstore.$conns.$figure" "$places")
        else
          o=${PAIR[$round.$conns.old.$figure]} n=${PAIR[$round.$conns.plantstore.$figure]}
        fi
        row+=" $o | $n | $(ratio "$n" "$o") |"
      done
      echo "$row"
    done
  done
  echo
}
# The pinned section's figures by round, connection count, server and
# figure, for compare_table.
declare -A PAIR

section_pinned() {
  need_nginx
  CLK_TCK=$(getconf CLK_TCK)
  local hard
  hard=$(ulimit -Hn)
  [ "$hard" = unlimited ] && hard=1048576
  ulimit -n "$hard" 2>/dev/null || true
  local servers=(plantstore reference nginx)
  [ -z "$OLD_BIN" ] || servers=(old plantstore)

  echo "## POST /plants on one core each: server on CPU 0, wrk -t1 on CPU 1 ($DURATION, $ROUNDS rounds)"
  echo
  if [ -n "$OLD_BIN" ]; then
    describe_binaries
    echo "Both with the flags \`${PINNED_ARGS:-(none)}\`, the old one first in each pair."
  else
    echo "plantstore flags: \`${PINNED_ARGS:-(none)}\`. nginx: one process, a canned 200 JSON."
  fi
  echo "plantstore: a token file of the write token and a read token (a build without"
  echo "token scopes: PLANTSTORE_TOKEN alone), and 20 wrong tokens from 127.0.0.2 before"
  echo "each run, so that its auth-failure table is not empty."
  echo "Server CPU and context switches are over the measured run, per request."
  echo
  echo "| round | connections | server | requests/s | p50 ms | p99 ms | errors | server CPU µs/request | context switches/request |"
  echo "|---|---|---|---|---|---|---|---|---|"
  local round conns server
  for round in $(seq 1 "$ROUNDS"); do
    for conns in 16 64 1024; do
      for server in "${servers[@]}"; do
        start_pinned "$server"
        pinned_run "$conns"
        stop_server
        add "pinned.$server.$conns.rps" "$RPS"
        add "pinned.$server.$conns.p99" "$P99"
        add "pinned.$server.$conns.cpu" "$CPU_US"
        add "pinned.$server.$conns.ctx" "$CTX"
        PAIR[$round.$conns.$server.rps]=$RPS PAIR[$round.$conns.$server.p99]=$P99
        PAIR[$round.$conns.$server.cpu]=$CPU_US
        echo "| $round | $conns | $(label "$server") | $RPS | $P50 | $P99 | $ERRORS | $CPU_US | $CTX |"
      done
    done
  done
  echo
  [ -z "$OLD_BIN" ] || compare_table

  echo "## $IDLE_CONNS idle keep-alive connections (server on CPU 0, bench/hold.py and wrk on CPU 1)"
  echo
  echo "Each connection sent one \`GET /healthz\` and read its reply, then stays open;"
  echo "meanwhile a fresh client: wrk -t1 -c4 POST /plants, 2 s warm-up, $DURATION."
  echo "plantstore flags: \`${PINNED_ARGS:+$PINNED_ARGS }--max-connections 20000 --idle-timeout 600\`."
  echo
  if [ "$(ulimit -n)" -le $((IDLE_CONNS + 100)) ]; then
    echo "Skipped: open-file limit $(ulimit -n) is too low for $IDLE_CONNS connections."
    echo
    return
  fi
  echo "| server | RSS before, KiB | RSS with them open, KiB | growth, KiB | held | closed by the server meanwhile | fresh client requests/s | p50 ms | p99 ms | errors |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  local before with held failed closed
  servers=(plantstore reference)
  [ -z "$OLD_BIN" ] || servers=(old plantstore)
  for server in "${servers[@]}"; do
    if [ $server = reference ]; then
      start_pinned reference
    else
      start_pinned "$server" --max-connections 20000 --idle-timeout 600
    fi
    sleep 0.5
    before=$(rss_kib)
    hold "$WORK/hold.out" python3 bench/hold.py "$ADDR" "$IDLE_CONNS"
    read -r _ held failed <<<"$(grep '^ready' "$WORK/hold.out" || echo "ready 0 $IDLE_CONNS")"
    sleep 1
    with=$(rss_kib)
    pinned_run 4
    kill "$HOLD_PID" 2>/dev/null || true
    wait "$HOLD_PID" || true
    HOLD_PID=
    closed=$(awk '/^closed/{print $2}' "$WORK/hold.out")
    stop_server
    echo "| $(label "$server") | $before | $with | $((with - before)) | $held ($failed failed) | ${closed:-?} | $RPS | $P50 | $P99 | $ERRORS |"
    if [ $server = plantstore ]; then
      HOLD_GROWTH=$((with - before)) HOLD_HELD=$held HOLD_P99=$P99
    fi
  done
  echo
}

# The postgres section's helpers.
# pg_db: an empty database plantstore_bench beside the one
# PLANTSTORE_TEST_DATABASE names (the URL's last path segment); sets
# PG_URL to it.
pg_db() {
  psql -q -X -v ON_ERROR_STOP=1 -d "$PLANTSTORE_TEST_DATABASE" -c "SET client_min_messages = warning" \
    -c "DROP DATABASE IF EXISTS plantstore_bench WITH (FORCE)" -c "CREATE DATABASE plantstore_bench"
  PG_URL=${PLANTSTORE_TEST_DATABASE%/*}/plantstore_bench
}

# pg_setting NAME: a setting of the database server.
pg_setting() { psql -X -At -d "$PG_URL" -c "SHOW $1"; }

# start_instance CPU ARGS...: one more plantstore (the postgres build when
# ARGS has --database) on CPU (taskset, "" for none), kept in EXTRA_PIDS;
# sets ADDR. Its log is $WORK/instance.PID.log.
start_instance() {
  local cpu=$1 bin=$BIN
  shift
  [[ " $* " == *" --database "* ]] && bin=$PG_BIN
  PIN=()
  [ -z "$cpu" ] || PIN=(taskset -c "$cpu")
  BIN=$bin start_server "$@"
  PIN=()
  # The server keeps writing to the file it opened, renamed.
  mv "$WORK/server.log" "$WORK/instance.$SERVER_PID.log"
  EXTRA_PIDS+=("$SERVER_PID")
  SERVER_PID=
}

# start_proxy A B: nginx in front of the instances at addresses A and B,
# from contrib/nginx-plantstore.conf (@LISTEN@, @INSTANCE_A@ and
# @INSTANCE_B@ replaced), kept in EXTRA_PIDS; sets ADDR to its own address
# and PROXY_PID. A template with an events block is a whole configuration
# and runs as it is, with $WORK/proxy as its prefix (its pid file and logs
# go there, as the template says); otherwise
# it goes in the http block of one of ours: one process (the worker, master
# off), no access log.
start_proxy() {
  local dir=$WORK/proxy template=contrib/nginx-plantstore.conf started
  [ -f "$template" ] || { echo "no $template: the postgres section needs it" >&2; exit 1; }
  mkdir -p "$dir/logs"
  free_port
  sed -e "s/@LISTEN@/$ADDR/g" -e "s/@INSTANCE_A@/$1/g" -e "s/@INSTANCE_B@/$2/g" \
    "$template" >"$dir/plantstore.conf"
  local conf=$dir/plantstore.conf globals="daemon off;"
  if ! grep -Eq '^[[:space:]]*events[[:space:]]*\{' "$conf"; then
    conf=$dir/nginx.conf globals=
    nginx_conf "$dir" "  include $dir/plantstore.conf;"
  fi
  started=$(date +%s%N)
  "$NGINX" -p "$dir/" -c "$conf" -e "$dir/error.log" ${globals:+-g "$globals"} \
    2>"$WORK/server.log" &
  SERVER_PID=$!
  wait_port "$started"
  PROXY_PID=$SERVER_PID
  EXTRA_PIDS+=("$SERVER_PID")
  SERVER_PID=
}

# stop_extra: stops every process in EXTRA_PIDS.
stop_extra() {
  local pid
  for pid in "${EXTRA_PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  EXTRA_PIDS=()
  PROXY_PID=
}

# ticks_of PID...: utime + stime of each process, threads included, summed
# (clock ticks); a process gone counts 0.
# tree_ticks PID: ticks_of the process and its children (nginx's workers).
# shellcheck disable=SC2046
tree_ticks() { ticks_of "$1" $(pgrep -P "$1" || true); }

ticks_of() {
  local pid total=0 t
  for pid in "$@"; do
    t=$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{print $12 + $13}') || t=0
    total=$((total + ${t:-0}))
  done
  echo "$total"
}

# pg_ticks: PostgreSQL's CPU so far: the postmaster, every live child
# (backends, WAL writer, checkpointer...) and the children it reaped.
pg_ticks() {
  local own reaped
  # shellcheck disable=SC2046 # one pid a word
  own=$(ticks_of "$PG_POSTMASTER" $(pgrep -P "$PG_POSTMASTER"))
  reaped=$(sed 's/^.*) //' "/proc/$PG_POSTMASTER/stat" | awk '{print $14 + $15}')
  echo $((own + reaped))
}

# busy_ticks: every CPU's busy time so far (user, nice, system, irq and
# softirq; not idle, iowait or steal).
busy_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat; }

# child_ticks: sets CHILD_TICKS to the CPU of this shell's children that
# have ended (bash's `times`, second line), in clock ticks: between the two
# MEASURE calls of a run, that is wrk (and the grep it pipes to). `times`
# runs in this shell: in a subshell or a pipeline it would count none.
child_ticks() {
  times >"$WORK/times"
  CHILD_TICKS=$(awk -v hz="$CLK_TCK" 'NR == 2 {
    t = 0
    for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); t += p[1] * 60 + p[2] }
    printf "%.0f\n", t * hz
  }' "$WORK/times")
}

# pg_cpu start|stop: the MEASURE of the POST runs; at stop sets CPU_ROW,
# table cells of CPU seconds: each instance in EXTRA_PIDS, PostgreSQL,
# nginx, wrk, everything else, every CPU busy, and what the CPUs had.
pg_cpu() {
  local pid
  if [ "$1" = start ]; then
    declare -gA CPU_AT=([pg]=$(pg_ticks) [busy]=$(busy_ticks))
    for pid in "${EXTRA_PIDS[@]}"; do CPU_AT[$pid]=$(tree_ticks "$pid"); done
    CPU_STARTED=$(date +%s%N)
    child_ticks
    CPU_AT[wrk]=$CHILD_TICKS
    return
  fi
  local wrk wall used ticks nginx=- pg=- busy instances=()
  CPU_FIRST_TICKS= CPU_PG_TICKS= CPU_WRK_TICKS=
  child_ticks
  wrk=$((CHILD_TICKS - CPU_AT[wrk]))
  CPU_WRK_TICKS=$wrk
  wall=$(awk "BEGIN{print ($(date +%s%N) - $CPU_STARTED) / 1e9}")
  used=$wrk
  for pid in "${EXTRA_PIDS[@]}"; do
    ticks=$(($(tree_ticks "$pid") - CPU_AT[$pid]))
    used=$((used + ticks))
    if [ "$pid" = "${PROXY_PID:-}" ]; then
      nginx=$(secs "$ticks")
    else
      instances+=("$(secs "$ticks")")
      CPU_FIRST_TICKS=${CPU_FIRST_TICKS:-$ticks}
    fi
  done
  if [ -n "$PG_MEASURED" ]; then
    pg=$(($(pg_ticks) - CPU_AT[pg]))
    CPU_PG_TICKS=$pg
    used=$((used + pg))
    pg=$(secs "$pg")
  fi
  busy=$(($(busy_ticks) - CPU_AT[busy]))
  CPU_ROW="${instances[0]} | ${instances[1]:--} | $pg | $nginx | $(secs "$wrk") |"
  CPU_ROW+=" $(secs $((busy - used))) | $(secs "$busy") | $(awk "BEGIN{printf \"%.1f\", $wall * $(nproc)}") |"
}

secs() { awk "BEGIN{printf \"%.1f\", $1 / $CLK_TCK}"; }

# pg_setup ROUND NAME: POST then GET through what was started (ADDR);
# adds their rows to the tables and stops it all.
pg_setup() {
  local round=$1 name=$2
  MEASURE=pg_cpu post "$PG_CONNS"
  PG_ROWS+=("| $round | $name | POST /plants | $RPS | $P50 | $P99 | $ERRORS |")
  PG_CPU_ROWS+=("| $round | $name | $CPU_ROW")
  if [ "$name" = "PostgreSQL, 1 instance" ]; then
    # Per request: plantstore's CPU, and PostgreSQL's per stored plant.
    add pg.one.rps "$RPS"
    add pg.one.requests "$REQUESTS"
    add pg.one.cpu "$CPU_FIRST_TICKS"
    add pg.one.pgcpu "$CPU_PG_TICKS"
    add pg.one.wrkcpu "$CPU_WRK_TICKS"
    # One connection: the latency a lone client sees.
    post 1
    PG_ROWS+=("| $round | $name | POST /plants, 1 connection | $RPS | $P50 | $P99 | $ERRORS |")
    add pg.c1.p50 "$P50"
    add pg.c1.p99 "$P99"
  fi
  GET_PATH="/plants?limit=100" post "$PG_CONNS" bench/get.lua
  PG_ROWS+=("| $round | $name | GET /plants?limit=100 | $RPS | $P50 | $P99 | $ERRORS |")
  stop_extra
}

# per_request KEY: SUM[KEY] (clock ticks over the PostgreSQL, 1 instance
# POST runs) in µs per request of those runs.
per_request() {
  awk "BEGIN{printf \"%.1f\", ${SUM[$1]:-0} / $CLK_TCK * 1e6 / ${SUM[pg.one.requests]}}"
}

# dur_secs: $DURATION (10s, 2m) in seconds, for pgbench -T.
dur_secs() {
  case $DURATION in
    *m) echo $((${DURATION%m} * 60)) ;;
    *s) echo "${DURATION%s}" ;;
    *) echo "$DURATION" ;;
  esac
}

# pgbench_run ROUND: pgbench running plantstore's own single-row INSERT at
# $PG_CONNS connections on a fresh database with plantstore's schema
# (made by a plantstore started and stopped on it), after a 2 s warm-up;
# adds the row to PGBENCH_ROWS and its transactions/s to SUM[pgbench.tps].
pgbench_run() {
  local round=$1 out tps count before pg
  pg_db
  start_instance "" --database "$PG_URL"
  stop_extra
  printf '%s\n' '\set id random(1, 4000000000000000000)' \
    "INSERT INTO plants (id, name, tag) VALUES (:id, 'plant', 'bench') ON CONFLICT (id) DO NOTHING;" \
    >"$WORK/insert.sql"
  local bench=(pgbench -n -M prepared -c "$PG_CONNS" -j 2 -f "$WORK/insert.sql")
  "${bench[@]}" -T 2 "$PG_URL" >/dev/null 2>&1
  before=$(pg_ticks)
  out=$("${bench[@]}" -T "$(dur_secs)" "$PG_URL" 2>&1)
  pg=$(($(pg_ticks) - before))
  tps=$(awk '/^tps = /{printf "%.0f", $3}' <<<"$out")
  count=$(awk -F': ' '/actually processed/{print $2}' <<<"$out")
  [ -n "$tps" ] && [ -n "$count" ] || { echo "pgbench failed: $out" >&2; exit 1; }
  add pgbench.tps "$tps"
  PGBENCH_ROWS+=("| $round | $tps | $(awk "BEGIN{printf \"%.1f\", $pg / $CLK_TCK * 1e6 / $count}") |")
}

# health_ms STATUS SINCE: polls the instance's /healthz (at ADDR) every
# 10 ms until it answers STATUS, for at most 10 s; prints the ms since
# SINCE (date +%s%N), or 10001 if it did not.
health_ms() {
  local status=$1 since=$2 got
  for _ in $(seq 1 1000); do
    got=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://$ADDR/healthz" || true)
    if [ "$got" = "$status" ]; then
      echo $((($(date +%s%N) - since) / 1000000))
      return
    fi
    sleep 0.01
  done
  echo 10001
}

# health_flips: how long /healthz takes to say 503 once PostgreSQL is gone
# and 200 once it is back: stopped (pg_ctl stop -m fast) and started
# again, and frozen (SIGSTOP to the postmaster and every child, as a hung
# host looks) and thawed. Needs the stop and start commands of
# scripts/with-postgres.sh. Sets HEALTH_MAX (ms).
health_flips() {
  if [ -z "${PLANTSTORE_TEST_PG_STOP:-}" ] || [ -z "${PLANTSTORE_TEST_PG_START:-}" ]; then
    echo "Health flips not measured: run through scripts/with-postgres.sh."
    echo
    return
  fi
  local since down up pids rows=()
  pg_db
  start_instance "" --database "$PG_URL"
  sleep 1
  since=$(date +%s%N)
  sh -c "$PLANTSTORE_TEST_PG_STOP"
  down=$(health_ms 503 "$since")
  sleep 1
  sh -c "$PLANTSTORE_TEST_PG_START"
  up=$(health_ms 200 "$(date +%s%N)")
  rows+=("| stopped (pg_ctl stop -m fast; from the stop command), started again (from pg_ctl start's return) | $down | $up |")
  HEALTH_MAX=$(printf '%s\n' "$down" "$up" | sort -n | tail -1)
  PG_POSTMASTER=$(head -n 1 "$(pg_setting data_directory)/postmaster.pid")
  sleep 1
  pids="$(pgrep -P "$PG_POSTMASTER" | tr '\n' ' ')$PG_POSTMASTER"
  since=$(date +%s%N)
  # shellcheck disable=SC2086 # one pid a word
  kill -STOP $pids
  down=$(health_ms 503 "$since")
  sleep 1
  since=$(date +%s%N)
  # shellcheck disable=SC2086
  kill -CONT $pids
  up=$(health_ms 200 "$since")
  rows+=("| frozen (SIGSTOP to every PostgreSQL process), thawed | $down | $up |")
  HEALTH_MAX=$(printf '%s\n' "$HEALTH_MAX" "$down" "$up" | sort -n | tail -1)
  stop_extra
  echo "/healthz of one instance while PostgreSQL goes away and comes back (polled every 10 ms):"
  echo
  echo "| PostgreSQL | ms until 503 | ms until 200 again (10001: not within 10 s) |"
  echo "|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
}

# commit_ms: per autocommit INSERT into commit_probe on one connection,
# $COMMITS of them through one psql, in ms (psql's own start-up included).
commit_ms() {
  local started
  started=$(date +%s%N)
  seq "$COMMITS" | sed 's/.*/INSERT INTO commit_probe VALUES (&);/' |
    psql -q -X -v ON_ERROR_STOP=1 -d "$PG_URL" >/dev/null
  awk "BEGIN{printf \"%.3f\", ($(date +%s%N) - $started) / 1e6 / $COMMITS}"
}

section_postgres() {
  need_nginx
  CLK_TCK=$(getconf CLK_TCK)
  PG_CONNS=${PG_CONNS:-64}
  COMMITS=${COMMITS:-1000}
  local args cpu_a='' cpu_b='' pinning
  read -ra args <<<"${PG_ARGS:-}"
  pg_db
  PG_POSTMASTER=$(head -n 1 "$(pg_setting data_directory)/postmaster.pid")
  if [ "$(nproc)" -ge 4 ]; then
    cpu_a=0 cpu_b=1
    pinning="Each instance on a CPU of its own (taskset: one instance on CPU 0, two on
CPUs 0 and 1); wrk, nginx and PostgreSQL are not pinned."
  else
    pinning="Nothing pinned: $(nproc) CPUs here, and pinning takes 4 (one for each
instance, the rest for wrk, nginx and PostgreSQL), so every process shares every CPU."
  fi
  echo "## POST /plants, then GET /plants?limit=100: in memory, --data, PostgreSQL (wrk -t2 -c$PG_CONNS, $DURATION, $ROUNDS rounds)"
  echo
  echo "PostgreSQL $(pg_setting server_version) (\`PLANTSTORE_TEST_DATABASE\`; fsync $(pg_setting fsync),"
  echo "synchronous_commit $(pg_setting synchronous_commit), wal_sync_method $(pg_setting wal_sync_method));"
  echo "each setup starts on an empty store or database, and its GET run reads"
  echo "what its POST run stored. The postgres build runs with \`--database\` and"
  if [ ${#args[@]} -gt 0 ]; then echo "\`${args[*]}\`;"; else echo "its default pool;"; fi
  echo "two instances share one database behind nginx (contrib/nginx-plantstore.conf)."
  echo "$pinning"
  echo
  PG_ROWS=() PG_CPU_ROWS=() PGBENCH_ROWS=()
  local round a
  for round in $(seq 1 "$ROUNDS"); do
    PG_MEASURED=
    start_instance "$cpu_a"
    pg_setup "$round" "in memory, 1 instance"
    rm -f "$WORK/pg.journal"
    start_instance "$cpu_a" --data "$WORK/pg.journal" --sync always
    pg_setup "$round" "--data --sync always, 1 instance"
    PG_MEASURED=1
    pg_db
    start_instance "$cpu_a" --database "$PG_URL" ${args[@]+"${args[@]}"}
    pg_setup "$round" "PostgreSQL, 1 instance"
    pgbench_run "$round"
    pg_db
    start_instance "$cpu_a" --database "$PG_URL" ${args[@]+"${args[@]}"}
    a=$ADDR
    start_instance "$cpu_b" --database "$PG_URL" ${args[@]+"${args[@]}"}
    start_proxy "$a" "$ADDR"
    pg_setup "$round" "PostgreSQL, 2 instances behind nginx"
  done
  echo "| round | setup | request | requests/s | p50 ms | p99 ms | errors |"
  echo "|---|---|---|---|---|---|---|"
  printf '%s\n' "${PG_ROWS[@]}"
  echo
  echo "CPU seconds over each measured POST run. PostgreSQL: all its processes;"
  echo "else: every CPU's busy time less the processes listed (the kernel's own"
  echo "threads and interrupts, and anything else running on the machine)."
  echo
  echo "| round | setup | instance 1 | instance 2 | PostgreSQL | nginx | wrk | else | all CPUs busy | CPUs × wall |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${PG_CPU_ROWS[@]}"
  echo
  PG_ONE_CPU_US=$(per_request pg.one.cpu) PG_ONE_PG_US=$(per_request pg.one.pgcpu)
  PG_RATIO=$(ratio "${SUM[pg.one.rps]}" "${SUM[pgbench.tps]}")
  PG_C1_P50=$(mean pg.c1.p50) PG_C1_P99=$(mean pg.c1.p99)
  echo "pgbench on the same cluster, in the same rounds: plantstore's own single-row"
  echo "INSERT (\`pgbench -n -M prepared -c $PG_CONNS -j 2\`, ids at random, \`ON CONFLICT (id)"
  echo 'DO NOTHING`), into a fresh database with the schema plantstore makes.'
  echo
  echo "| round | pgbench transactions/s | PostgreSQL CPU per INSERT, µs |"
  echo "|---|---|---|"
  printf '%s\n' "${PGBENCH_ROWS[@]}"
  echo
  echo "PostgreSQL, 1 instance, mean of rounds: $(mean pg.one.rps 0) POST/s, $PG_RATIO x pgbench;"
  echo "CPU per request: plantstore $PG_ONE_CPU_US µs, PostgreSQL $PG_ONE_PG_US µs (a stored plant),"
  echo "wrk $(per_request pg.one.wrkcpu) µs; one connection: p50 $PG_C1_P50 ms, p99 $PG_C1_P99 ms."
  echo
  health_flips
  local on off
  pg_db
  psql -q -X -d "$PG_URL" -c "CREATE TABLE commit_probe (n integer)"
  on=$(commit_ms)
  off=$(PGOPTIONS="-c synchronous_commit=off" commit_ms)
  echo "PostgreSQL commit on one connection ($COMMITS autocommit INSERTs through one psql):"
  echo "$on ms each; $off ms with synchronous_commit off (no wait for the WAL flush)."
  echo
  psql -q -X -d "$PLANTSTORE_TEST_DATABASE" -c "DROP DATABASE plantstore_bench WITH (FORCE)"
}

# met CONDITION: "met" or "NOT met".
met() { if awk "BEGIN{exit !($1)}"; then echo met; else echo "**NOT met**"; fi; }
# met_at_scale CONDITION: as met, for a budget stated for 1,000,000 plants:
# not judged when $PLANTS is another count.
met_at_scale() {
  if [ "$PLANTS" = 1000000 ]; then met "$1"; else echo "not judged ($PLANTS plants)"; fi
}

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
  local server negotiated
  for server in plantstore nginx-tls; do
    if [ $server = plantstore ]; then start_pinned plantstore "${tls[@]}"; else start_pinned nginx-tls; fi
    negotiated=$(openssl s_client -connect "$ADDR" </dev/null 2>/dev/null | awk '/^New,/{print $2, $5}')
    echo "- $server negotiates: ${negotiated:-?}"
    stop_server
  done
  echo
  echo "| round | server | keep-alive POST c64 req/s | p99 ms | CPU µs/request | new connections/s (full) | CPU µs/connection | new connections/s (resumed) | CPU µs/connection |"
  echo "|---|---|---|---|---|---|---|---|---|"
  local round
  for round in $(seq 1 "$ROUNDS"); do
    for server in plantstore nginx-tls; do
      if [ $server = plantstore ]; then start_pinned plantstore "${tls[@]}"; else start_pinned nginx-tls; fi
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
  echo

  # Idle TLS connections: what 1,000 of them add to the server's RSS.
  local held=${TLS_IDLE:-1000} before with ready
  start_pinned plantstore "${tls[@]}" --idle-timeout 600
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
  echo "| idle TLS connections (bench/hold_tls.py: one GET /healthz each, then idle) | held, failed | RSS before, KiB | with them open, KiB | growth, KiB |"
  echo "|---|---|---|---|---|"
  echo "| $held | $(echo "$ready" | awk '{print $2", "$3}') | $before | $with | $TLS_IDLE_GROWTH |"
  echo
}

# feed_run SUBSCRIBERS RATE: a fresh server in memory, SUBSCRIBERS streams
# and RATE creates a second for FEED_SECONDS (examples/feed_load); sets
# FEED_RESULT (its RESULT line, without the word) and FEED_TICKS (server
# CPU over the run, in clock ticks).
feed_run() {
  local ticks
  start_server
  ticks=$(cpu_ticks)
  FEED_RESULT=$(target/release/examples/feed_load "$ADDR" "$TOKEN" "$1" "$2" "$FEED_SECONDS" |
    sed -n 's/^RESULT //p')
  FEED_TICKS=$(($(cpu_ticks) - ticks))
  stop_server
}

section_feed() {
  CLK_TCK=$(getconf CLK_TCK)
  local round rps_none rps_idle rps_all before held subs rate changes complete p50 p99 max
  echo "## The change feed: POST at 64 connections with 100 subscribers open (wrk -t2, $DURATION)"
  echo
  echo "Idle: 100 streams following a tag the POSTs do not carry (?tag=idle): open,"
  echo "woken each round, sent nothing. Receiving: 100 streams of every change, so"
  echo "each POST is 100 events sent, and read by 100 reader threads on the same cores."
  echo
  echo "| round | without | with 100 idle | ratio | with 100 receiving every change | ratio |"
  echo "|---|---|---|---|---|---|"
  for round in $(seq 1 "$ROUNDS"); do
    start_server
    post 64; rps_none=$RPS
    hold "$WORK/hold.out" target/release/examples/feed_load "$ADDR" "$TOKEN" 100 --hold idle
    post 64; rps_idle=$RPS
    kill "$HOLD_PID" && wait "$HOLD_PID" 2>/dev/null || true
    hold "$WORK/hold.out" target/release/examples/feed_load "$ADDR" "$TOKEN" 100 --hold
    post 64; rps_all=$RPS
    kill "$HOLD_PID" && wait "$HOLD_PID" 2>/dev/null || true
    HOLD_PID=
    stop_server
    add feed.none "$rps_none"; add feed.idle "$rps_idle"; add feed.all "$rps_all"
    echo "| $round | $rps_none | $rps_idle | $(ratio "$rps_idle" "$rps_none") | $rps_all | $(ratio "$rps_all" "$rps_none") |"
  done
  FEED_IDLE_RATIO=$(ratio "${SUM[feed.idle]}" "${SUM[feed.none]}")
  echo
  # Memory: 1,000 subscribers held on a fresh server.
  start_server
  before=$(rss_kib)
  hold "$WORK/hold.out" target/release/examples/feed_load "$ADDR" "$TOKEN" 1000 --hold
  held=$(rss_kib)
  kill "$HOLD_PID" && wait "$HOLD_PID" 2>/dev/null || true
  HOLD_PID=
  stop_server
  FEED_SUB_KIB=$(awk "BEGIN{printf \"%.1f\", ($held - $before) / 1000}")
  echo "1,000 open streams: RSS $before -> $held KiB, $FEED_SUB_KIB KiB per subscriber"
  echo
  echo "## The change feed: delivery (examples/feed_load, a native reader; creates for ${FEED_SECONDS}s)"
  echo
  echo "| subscribers | changes/s | changes | got every event, in order | events per subscriber (min-max) | delay p50 / p99 / max ms | feed CPU per delivered event |"
  echo "|---|---|---|---|---|---|---|"
  FEED_COMPLETE=1 FEED_DELAY_P99=0
  for subs_rate in 100:5000 1000:500; do
    subs=${subs_rate%:*} rate=${subs_rate#*:}
    # The same creates with no subscriber: what the feed's CPU adds.
    feed_run 0 "$rate"
    local base_ticks=$FEED_TICKS
    feed_run "$subs" "$rate"
    read -r changes _ complete min max p50 p99 max_ms <<<"$FEED_RESULT"
    local cpu
    cpu=$(awk "BEGIN{d = $FEED_TICKS - $base_ticks; if (d < 0) d = 0; printf \"%.2f\", d * 1e6 / $CLK_TCK / ($changes * $subs)}")
    echo "| $subs | $rate | $changes | $complete of $subs | $min-$max | $p50 / $p99 / $max_ms | $cpu µs |"
    [ "$complete" = "$subs" ] || FEED_COMPLETE=0
    FEED_DELAY_P99=$(awk "BEGIN{print ($p99 > $FEED_DELAY_P99) ? $p99 : $FEED_DELAY_P99}")
  done
  echo
  echo "The delay runs from a create's answer reaching its writer to its event reaching"
  echo "a subscriber; the feed's CPU is the server's CPU over the run less that of the"
  echo "same creates with no subscriber, per event delivered."
  echo
}

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
    echo "| idle RSS (ps, default flags, largest of 3 starts) <= 2 MiB (2048 KiB) | $IDLE KiB in memory, $IDLE_DATA KiB with --data | $(met "$IDLE <= 2048 && $IDLE_DATA <= 2048") |"
    [ -z "${IDLE_STATIC:-}" ] ||
      echo "| idle RSS of the static build <= 2 MiB (2048 KiB) | $IDLE_STATIC KiB ($STATIC_TARGET) | $(met "$IDLE_STATIC <= 2048") |"
    echo "| 1,000,000 plants in <= 102400 KiB more RSS | $((LOADED - IDLE)) KiB more ($LOADED KiB) | $(met_at_scale "$LOADED - $IDLE <= 102400") |"
    if [ "$HOST" = x86_64-unknown-linux-gnu ]; then
      echo "| published x86_64 binary, plain build (FEATURES=plain scripts/release-build.sh x86_64-unknown-linux-gnu) <= 600 KiB (614400 bytes) | $SIZE bytes | $(met "$SIZE <= 614400") |"
      echo "| published x86_64 binary, HTTPS build (scripts/release-build.sh x86_64-unknown-linux-gnu) <= 1.25 MiB (1310720 bytes) | $HTTPS_SIZE bytes | $(met "$HTTPS_SIZE <= 1310720") |"
    else
      echo "| published x86_64 binary, plain build <= 600 KiB (614400 bytes) | $SIZE bytes ($HOST build) | not judged (not x86_64) |"
    fi
  fi
  if [ -n "${HTTPS_KEEPALIVE:-}" ]; then
    echo "| HTTPS keep-alive POST at 64 connections >= 1.0x nginx with TLS 1.3, the same certificate (one core each, mean of rounds) | ${HTTPS_KEEPALIVE}x | $(met "$HTTPS_KEEPALIVE >= 1.0") |"
    echo "| a new TLS 1.3 connection per request >= 0.8x nginx, full handshakes | ${HTTPS_NEW}x | $(met "$HTTPS_NEW >= 0.8") |"
    echo "| a new TLS 1.3 connection per request >= 0.8x nginx, session resumption | ${HTTPS_REUSE}x | $(met "$HTTPS_REUSE >= 0.8") |"
    echo "| 1,000 idle TLS connections add <= 32 MiB (32768 KiB) | $TLS_IDLE_GROWTH KiB | $(met "$TLS_IDLE_GROWTH <= 32768") |"
  fi
  if [ -n "${PG_RATIO:-}" ]; then
    echo "| PostgreSQL store at $PG_CONNS connections >= 2.5x pgbench running its single-row INSERT (mean of rounds) | ${PG_RATIO}x | $(met "$PG_RATIO >= 2.5") |"
    echo "| plantstore CPU per request on PostgreSQL <= 15 µs | $PG_ONE_CPU_US µs | $(met "$PG_ONE_CPU_US <= 15") |"
    echo "| PostgreSQL CPU per stored plant <= 20 µs | $PG_ONE_PG_US µs | $(met "$PG_ONE_PG_US <= 20") |"
  fi
  [ -n "${HEALTH_MAX:-}" ] &&
    echo "| /healthz turns 503 and back within 1 s, stopped or frozen (slowest) | $HEALTH_MAX ms | $(met "$HEALTH_MAX <= 1000") |"
  [ -n "${DURABLE_RATIO:-}" ] &&
    echo "| --sync always at 64 connections >= 0.8x in memory | ${DURABLE_RATIO}x | $(met "$DURABLE_RATIO >= 0.8") |"
  [ -n "${STARTUP_MAX:-}" ] &&
    echo "| start-up with a journal of 1,000,000 plants < 1 s (slowest of 3) | $STARTUP_MAX ms | $(met_at_scale "$STARTUP_MAX < 1000") |"
  [ -n "${STARTUP_PEAK_OVER:-}" ] &&
    echo "| start-up peak RSS <= the RSS once started + 16384 KiB (largest of 3) | +$STARTUP_PEAK_OVER KiB | $(met "$STARTUP_PEAK_OVER <= 16384") |"
  [ -n "${RESTART_MAX:-}" ] &&
    echo "| restart after a crafted torn tail of 1 MiB < 1 s (slowest of every tail and run) | $RESTART_MAX ms | $(met "$RESTART_MAX < 1000") |"
  if [ -n "${SUM[writers.loaded.p99]:-}" ]; then
    local loaded alone
    loaded=$(mean writers.loaded.p99 3) alone=$(mean writers.alone.p99 3)
    echo "| writers' p99 under looping worst-case listings <= 1 ms, 1,000,000 plants (mean of rounds) | $loaded ms (alone: $alone ms, $(ratio "$loaded" "$alone")x; largest max $WRITERS_MAX ms) | $(met_at_scale "$loaded <= 1") |"
  fi
  if [ -n "${SUM[writers.large.p99]:-}" ]; then
    local large
    large=$(mean writers.large.p99 3)
    echo "| writers' p99 under 4 loops of 256 KiB pages <= 5 ms (mean of rounds) | $large ms | $(met "$large <= 5") |"
  fi
  if [ -n "${SUM[query.memory.any.p99]:-}" ]; then
    local first any search writer
    first=$(mean query.memory.first.p99) any=$(mean query.memory.any.p99)
    search=$(mean query.memory.search.p99) writer=$(mean query.writer.p99 3)
    echo "| \`?sort=name&limit=100\`, any page: p99 <= 5 ms, 1,000,000 plants, memory store (mean of rounds; pages after random plants, and the first) | $any ms, first page $first ms (first page in id order: $(mean query.memory.id.p99) ms) | $(met_at_scale "$any <= 5 && $first <= 5") |"
    echo "| \`?q=\` matching 1 plant in 10,000, first page: p99 <= 100 ms (mean of rounds) | $search ms | $(met_at_scale "$search <= 100") |"
    echo "| writers' p99 while 4 clients loop that search <= 1 ms (mean of rounds) | $writer ms (alone: $(mean query.alone.p99 3) ms) | $(met_at_scale "$writer <= 1") |"
    echo "| memory for the name order <= 48 bytes a plant | $QUERY_ORDER_BYTES bytes ($QUERY_ORDER_HOW) | $(PLANTS=$QUERY_ORDER_AT met_at_scale "$QUERY_ORDER_BYTES <= 48") |"
  fi
  if [ -n "${SUM[query.postgres.any.p99]:-}" ]; then
    local first any search
    first=$(mean query.postgres.first.p99) any=$(mean query.postgres.any.p99)
    search=$(mean query.postgres.search.p99)
    echo "| PostgreSQL, 1,000,000 rows: \`?sort=name\` page p99 <= 10 ms (mean of rounds; after random plants, and the first) | $any ms, first page $first ms (first page in id order: $(mean query.postgres.id.p99) ms) | $(met_at_scale "$any <= 10 && $first <= 10") |"
    echo "| PostgreSQL, 1,000,000 rows: \`?q=\` with the trigram index p99 <= 50 ms (mean of rounds) | $search ms$([ -n "${QUERY_PG_TRGM:-}" ] || echo ", **no trigram index**") | $(met_at_scale "$search <= 50") |"
  fi
  if [ -n "${COMPACT_HOLDS[*]:-}" ]; then
    # The largest round is judged: a writer waits as long as the worst hold.
    local hold
    hold=$(printf '%s\n' "${COMPACT_HOLDS[@]}" | sort -n | tail -1)
    echo "| longest store lock hold while compacting 1,000,000 plants < 5 ms (largest of rounds) | $hold µs (rounds: ${COMPACT_HOLDS[*]} µs; RSS at most $COMPACT_PEAK_GROWTH KiB above before) | $(met_at_scale "$hold < 5000") |"
  fi
  local cpu nginx_cpu ctx nginx nginx_p99
  for conns in 16 64 1024; do
    # Not with OLD: the pinned section then runs no reference or nginx.
    [ -n "${SUM[pinned.plantstore.$conns.rps]:-}" ] &&
      [ -n "${SUM[pinned.reference.$conns.rps]:-}" ] || continue
    cpu=$(mean "pinned.plantstore.$conns.cpu" 1) nginx_cpu=$(mean "pinned.nginx.$conns.cpu" 1)
    ctx=$(mean "pinned.plantstore.$conns.ctx" 3)
    ours=${SUM[pinned.plantstore.$conns.rps]} theirs=${SUM[pinned.reference.$conns.rps]}
    nginx=${SUM[pinned.nginx.$conns.rps]}
    p99=$(mean "pinned.plantstore.$conns.p99" 3) ref_p99=$(mean "pinned.reference.$conns.p99" 3)
    nginx_p99=$(mean "pinned.nginx.$conns.p99" 3)
    echo "| pinned, $conns connections: requests/s >= the reference's and nginx's | $(ratio "$ours" "$theirs")x, $(ratio "$ours" "$nginx")x | $(met "$ours >= $theirs && $ours >= $nginx") |"
    echo "| pinned, $conns connections: p99 <= the reference's and nginx's | $p99 vs $ref_p99 and $nginx_p99 ms | $(met "$p99 <= $ref_p99 && $p99 <= $nginx_p99") |"
    echo "| pinned, $conns connections: server CPU per request as close to nginx's as it gets (aim 0.9x) | $cpu vs $nginx_cpu µs ($(ratio "$cpu" "$nginx_cpu")x) | aim $(met "$cpu <= 0.9 * $nginx_cpu") |"
    echo "| pinned, $conns connections: context switches per request < 0.1 | $ctx | $(met "$ctx < 0.1") |"
  done
  if [ -n "${FEED_IDLE_RATIO:-}" ]; then
    echo "| POST at 64 connections with 100 idle feed subscribers (following another tag) >= 0.9x without (sum of rounds) | ${FEED_IDLE_RATIO}x | $(met "$FEED_IDLE_RATIO >= 0.9") |"
    echo "| every subscriber gets every event: 100 at 5,000 changes/s, 1,000 at 500/s | $([ "$FEED_COMPLETE" = 1 ] && echo all || echo "not all") | $(met "$FEED_COMPLETE == 1") |"
    echo "| a change reaches a subscriber within 1 s (p99, slowest run) | $FEED_DELAY_P99 ms | $(met "$FEED_DELAY_P99 <= 1000") |"
  fi
  if [ -n "${HOLD_GROWTH:-}" ]; then
    echo "| $IDLE_CONNS idle connections in <= 20480 KiB more RSS (all held) | $HOLD_GROWTH KiB, $HOLD_HELD held | $(met "$HOLD_HELD == $IDLE_CONNS && $HOLD_GROWTH <= 20480") |"
    echo "| a fresh client's p99 < 10 ms with them open | $HOLD_P99 ms | $(met "$HOLD_P99 < 10") |"
  fi
  echo
}

# The query section, in a file of its own.
# shellcheck source=bench/query.sh
source bench/query.sh

echo "# plantstore $(grep -m1 '^version' Cargo.toml | cut -d'"' -f2) benchmarks, $(nproc) cores, $(date -u +%Y-%m-%d)"
echo
for section in "${SECTIONS[@]}"; do
  "section_$section"
done
