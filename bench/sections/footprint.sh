# The footprint section of bench/run.sh (`bench/run.sh footprint`): stripped
# binary sizes (the published builds of scripts/release-build.sh, HTTPS and
# plain, and a plain cargo build), idle RSS of each, in memory and with
# --data, RSS after storing $PLANTS short plants, GET /plants?limit=100 with
# them. The figures the budgets section judges: SIZE, HTTPS_SIZE, IDLE*,
# LOADED*. Sourced by bench/run.sh after bench/lib/*.sh, whose helpers it
# calls.
# shellcheck shell=bash

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
