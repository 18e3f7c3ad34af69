# The footprint section of bench/run.sh (`bench/run.sh footprint`): stripped
# binary sizes (the published builds of scripts/release/release-build.sh, HTTPS and
# plain, the postgres and static builds when built, and a plain cargo
# build), what the HTTPS and plain builds are made of (their largest
# crates and plantstore's modules, from the linker maps release-build.sh
# writes beside them: bench/linkmap.py), idle memory of each as RSS and
# as private memory (RssAnon: what the spec's budgets count), in memory and
# with --data, memory after storing $PLANTS short plants, GET
# /plants?limit=100 with them; and the sizes of the builds and packages
# found made already (cross-smoke.sh's, the packages' builds,
# package-deb.sh's packages). It rewrites those rows of docs/figures.md
# (bench/figures.py), the one page the published figures are kept on, and
# the only writer of its sizes: run it on purpose, and commit the page with
# the change it measures, so that the change's bytes show in its diff. The
# figures the budgets section judges: SIZE, HTTPS_SIZE, IDLE*, LOADED*.
# Sourced by bench/run.sh after bench/lib/*.sh, whose helpers it calls.
# shellcheck shell=bash

# idle_memory: the server's RSS and private memory (KiB) half a second
# after it started: sets IDLE_RSS_NOW and IDLE_ANON_NOW.
idle_memory() {
  sleep 0.5
  IDLE_RSS_NOW=$(rss_kib) IDLE_ANON_NOW=$(anon_kib)
}

# largest N...: the largest of the numbers.
largest() { printf '%s\n' "$@" | sort -n | tail -1; }

section_footprint() {
  echo "## Footprint"
  echo
  echo "| what | plantstore | reference |"
  echo "|---|---|---|"
  SIZE=$(stat -c %s "$PLAIN_BIN")
  HTTPS_SIZE=$(stat -c %s "$BIN")
  CARGO_SIZE=$(stat -c %s target/release/plantstore)
  echo "| published plain build, HTTP only ($PLAIN_BIN: FEATURES=plain scripts/release/release-build.sh $HOST, stripped), bytes | $SIZE | $(stat -c %s "$REFERENCE") |"
  echo "| published HTTPS build, the default ($BIN: scripts/release/release-build.sh $HOST, stripped), bytes | $HTTPS_SIZE | |"
  echo "| stripped binary, bytes (plain cargo build --release, the default features) | $CARGO_SIZE | |"
  # The postgres build, when built (the postgres and query sections build
  # it): its size only.
  local pg_bin=target/postgres/$HOST/release/plantstore
  PG_SIZE=
  if [ -x "$pg_bin" ]; then
    PG_SIZE=$(stat -c %s "$pg_bin")
    echo "| published PostgreSQL build ($pg_bin: FEATURES=postgres scripts/release/release-build.sh $HOST, stripped), bytes | $PG_SIZE | |"
  fi
  footprint_found
  footprint_idle
  footprint_stored
  echo
  footprint_made
  footprint_record
}

# footprint_found: the sizes of the other builds and packages made here
# already, each named with the day it was made (a build left from an older
# tree is recorded as it is: remake it first): every build of
# scripts/release/release-build.sh under target/ (static, cross and ARM,
# cross-smoke.sh's), the packages' builds (target/acme) and the packages
# of this version (package-deb.sh, target/debian). Sets FOUND (KEY VALUE
# pairs for docs/figures.md).
footprint_found() {
  local bin target deb arch version
  FOUND=()
  for bin in target/*-linux-*/release/plantstore target/acme/*-linux-*/release/plantstore; do
    [ -x "$bin" ] && [ "$bin" != "$BIN" ] || continue
    target=${bin%/release/plantstore}
    target=${target##*/}
    if [[ $bin == target/acme/* ]]; then FOUND+=("size.$target.acme"); else FOUND+=("size.$target"); fi
    FOUND+=("$(stat -c %s "$bin")")
    echo "| found: $bin (made $(date -r "$bin" +%Y-%m-%d)), bytes | $(stat -c %s "$bin") | |"
  done
  version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)-1
  for deb in target/debian/plantstore_"$version"_*.deb; do
    [ -f "$deb" ] || continue
    arch=${deb##*_}
    arch=${arch%.deb}
    FOUND+=("deb.$arch" "$(stat -c %s "$deb")")
    echo "| found: $deb (made $(date -r "$deb" +%Y-%m-%d)), bytes | $(stat -c %s "$deb") | |"
  done
}

# footprint_made: what the host's HTTPS and plain builds are made of, from
# the linker maps scripts/release/release-build.sh wrote beside them
# (bench/linkmap.py): printed, and those builds' rows of docs/figures.md
# replaced whole (a crate gone since leaves no row behind).
footprint_made() {
  local build bin pairs
  for build in https plain; do
    bin=$BIN
    [ $build = https ] || bin=$PLAIN_BIN
    [ -f "$bin.map" ] ||
      { echo "no linker map $bin.map (scripts/release/release-build.sh writes it)" >&2; exit 1; }
    python3 bench/linkmap.py "$bin.map" "The $build build of $HOST ($(stat -c %s "$bin") bytes)" \
      "made.$HOST.$build." "$WORK/made.$build"
    mapfile -t pairs < <(tr ' ' '\n' <"$WORK/made.$build")
    python3 bench/figures.py replace "made.$HOST.$build." "${pairs[@]}"
  done
}

# footprint_idle: idle memory of each build, default flags; the HTTPS
# build in memory last, left running for footprint_stored.
footprint_idle() {
  local ref_idle ref_anon
  start_reference; idle_memory; ref_idle=$IDLE_RSS_NOW ref_anon=$IDLE_ANON_NOW; stop_server
  # With --data (a new journal) and in memory, 3 starts each: the largest
  # counts.
  local run idle=() idle_data=() anon=() anon_data=()
  for run in 1 2 3; do
    rm -f "$WORK/idle.journal"
    start_server --data "$WORK/idle.journal"; idle_memory
    idle_data+=("$IDLE_RSS_NOW") anon_data+=("$IDLE_ANON_NOW")
    stop_server
  done
  rm -f "$WORK/idle.journal"
  # The static build (scripts/release/release-build.sh $STATIC_TARGET), when built:
  # no shared library mapped in, so its RSS is the process's own.
  STATIC_TARGET=${STATIC_TARGET:-$(uname -m)-unknown-linux-musl}
  STATIC_BIN=target/$STATIC_TARGET/release/plantstore
  local main_bin=$BIN
  IDLE_STATIC= IDLE_STATIC_ANON=
  if [ -x "$STATIC_BIN" ]; then
    BIN=$STATIC_BIN
    start_server; idle_memory; IDLE_STATIC=$IDLE_RSS_NOW IDLE_STATIC_ANON=$IDLE_ANON_NOW; stop_server
    BIN=$main_bin
  fi
  BIN=$PLAIN_BIN
  start_server; idle_memory; IDLE_PLAIN=$IDLE_RSS_NOW IDLE_PLAIN_ANON=$IDLE_ANON_NOW; stop_server
  BIN=$main_bin
  for run in 1 2 3; do
    start_server; idle_memory; idle+=("$IDLE_RSS_NOW") anon+=("$IDLE_ANON_NOW")
    [ $run = 3 ] || stop_server
  done
  IDLE=$(largest "${idle[@]}") IDLE_DATA=$(largest "${idle_data[@]}")
  IDLE_ANON=$(largest "${anon[@]}") IDLE_DATA_ANON=$(largest "${anon_data[@]}")
  echo "| idle RSS, KiB (3 starts; the largest counts) | ${idle[*]} | $ref_idle |"
  echo "| idle private memory (RssAnon), KiB (3 starts; the largest counts) | ${anon[*]} | $ref_anon |"
  # What that RSS is made of: the process's own memory (anonymous pages)
  # and pages of files mapped in (the binary, and for a dynamic build the
  # C library and loader, shared with every process using them). sleep(1)
  # shows the floor of a dynamically linked glibc program.
  echo "| of the last: private (RssAnon) / mapped files (RssFile), KiB | $(anon_kib) / $(awk '/RssFile/{print $2}' "/proc/$SERVER_PID/status") | |"
  local floor
  sleep 5 & floor=$!; sleep 0.3
  FLOOR_RSS=$(awk '/VmRSS/{print $2}' "/proc/$floor/status")
  echo "| a dynamically linked C program's floor: sleep(1)'s RSS, KiB | $FLOOR_RSS | |"
  kill "$floor"; wait "$floor" 2>/dev/null || true
  [ -z "$IDLE_STATIC" ] ||
    echo "| idle RSS of the static build ($STATIC_BIN, $(stat -c %s "$STATIC_BIN") bytes), KiB | $IDLE_STATIC | |"
  [ -z "$IDLE_STATIC" ] ||
    echo "| idle private memory of the static build, KiB | $IDLE_STATIC_ANON | |"
  echo "| idle RSS with --data (a new journal), KiB (3 starts; the largest counts) | ${idle_data[*]} | |"
  echo "| idle private memory with --data, KiB (3 starts; the largest counts) | ${anon_data[*]} | |"
  echo "| idle RSS of the plain build, KiB | $IDLE_PLAIN | |"
  echo "| idle private memory of the plain build, KiB | $IDLE_PLAIN_ANON | |"
}

# footprint_stored: $PLANTS short plants through the API, exactly, into
# the server footprint_idle left running; what they take, a listing with
# them; stops the server.
footprint_stored() {
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
  LOADED=$(rss_kib) LOADED_ANON=$(anon_kib)
  echo "| RSS with $stored plants stored, KiB | $LOADED | |"
  echo "| RSS growth for them, KiB | $((LOADED - IDLE)) | |"
  echo "| private memory with $stored plants stored, KiB; its growth for them | $LOADED_ANON; $((LOADED_ANON - IDLE_ANON)) | |"
  GET_PATH="/plants?limit=100" post 64 bench/get.lua
  echo "| GET /plants?limit=100 with $stored plants, 64 connections | $RPS req/s, p99 $P99 ms, $ERRORS errors | |"
  stop_server
  [ "$stored" = "$PLANTS" ] || { echo "stored $stored plants, not $PLANTS" >&2; exit 1; }
}

# footprint_record: the figures above into docs/figures.md (the published
# ones; bench/figures.py says which row is whose).
footprint_record() {
  local rows=(size."$HOST" "$HTTPS_SIZE" size."$HOST".plain "$SIZE" size.cargo "$CARGO_SIZE"
    idle.https.private "$IDLE_ANON" idle.https.rss "$IDLE"
    idle.https-data.private "$IDLE_DATA_ANON" idle.https-data.rss "$IDLE_DATA"
    idle.plain.private "$IDLE_PLAIN_ANON" idle.plain.rss "$IDLE_PLAIN" idle.floor.rss "$FLOOR_RSS")
  [ -z "$PG_SIZE" ] || rows+=(size."$HOST".postgres "$PG_SIZE")
  [ -z "$IDLE_STATIC" ] || rows+=(idle.static.private "$IDLE_STATIC_ANON" idle.static.rss "$IDLE_STATIC")
  rows+=(${FOUND[@]+"${FOUND[@]}"})
  # The store's rows at the spec's scale only: a quick run at another
  # count would publish a figure no page speaks of.
  [ "$PLANTS" != 1000000 ] || rows+=(store.1000000.private "$((LOADED_ANON - IDLE_ANON))"
    store.1000000.rss "$((LOADED - IDLE))")
  python3 bench/figures.py record "${rows[@]}"
  echo "footprint: figures recorded in docs/figures.md" >&2
}
