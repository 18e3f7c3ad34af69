#!/usr/bin/env bash
# The benchmark suite's driver: prints markdown tables of figures on
# stdout. It owns the settings (below), the builds measured and the order
# of the sections; each section is a file of its own, bench/sections/NAME.sh,
# whose header says what it measures, and the helpers they share are in
# bench/lib/*.sh. The footprint section also rewrites docs/figures.md
# (bench/figures.py), the one place the published figures are kept.
#
#   bench/run.sh [SECTION...]    (default: every section but postgres,
#                                 then the budgets)
#
#   reference  POST /plants in memory, plantstore vs the axum + tokio reference
#   footprint  sizes of the published builds and what the host's are made
#              of (bench/linkmap.py), idle memory (private and RSS), memory
#              with $PLANTS plants stored, the sizes of the other builds and
#              packages made already; rewrites docs/figures.md
#   durable    POST /plants in memory vs --data (sync always and never), one
#              core each: CPU per request, bytes written per change (or OLD vs new)
#   startup    start-up time and peak memory with a journal of $PLANTS plants
#   restart    restart after a torn tail of 1 MiB, for each crafted tail
#   writers    a writer loop alone and under looping worst-case listings
#   compaction the compaction of a journal of $PLANTS plants written 3 times
#   export     GET /export of $PLANTS plants, and the export as a --seed
#   pinned     one core each: plantstore vs the reference vs nginx (or OLD
#              vs new vs nginx), each against BASELINE too, then
#              $IDLE_CONNS idle keep-alive connections
#   https      one core each: plantstore over TLS vs nginx with TLS 1.3
#   feed       the change feed: POST with subscribers, delivery, memory
#   query      pages in name order and searches (bench/sections/query.sh)
#   hostile    an attacker's load and what it leaves to others: a flood of
#              wrong tokens from 100 addresses (bench/flood.py)
#   budgets    every budget of the spec, met or not, from the figures above
#              (bench/budgets.py)
#   postgres   (only when named; run it through scripts/with-postgres.sh,
#              which sets PLANTSTORE_TEST_DATABASE) in memory, --data and
#              the postgres build, against pgbench on the same cluster
#
# Settings (environment): DURATION (default 10s): each wrk run, after a 2 s
# warm-up. ROUNDS (default 2). PLANTS (default 1000000) scales the
# sections that store many plants down for a quick check (PLANTS=100000);
# budgets stated for 1,000,000 plants are then reported but not judged.
# PINNED_ARGS (default "--threads 1"), IDLE_CONNS (default 10000),
# TLS_IDLE (default 1000), FEED_SECONDS (default 5), LISTINGS (the writers'
# listings), STATIC_TARGET (footprint), PG_CONNS, PG_ARGS, COMMITS
# (postgres), LOG_LEVEL. Figures drift by about 30% between runs on a
# small shared machine: compare rows of one run, as ratios. Loopback only;
# every process started is stopped.
#
# OLD compares a change in one run instead of across two (whose figures
# drift): OLD=PATH names an earlier plantstore binary, OLD=REV a git
# revision, first built by bench/build-old.sh (target/old-COMMIT/):
#
#   OLD=HEAD~1 bench/run.sh pinned
#   OLD=$(bench/build-old.sh HEAD~5) DURATION=5s ROUNDS=3 bench/run.sh pinned
#
# The pinned section then runs, for each round and connection count, the
# old binary, the new one and nginx, same conditions and flags (the old
# one gets $PINNED_ARGS too, so it must know them), in place of
# plantstore, the reference and nginx; prints both binaries' sizes, and
# after its rounds a table of old vs new per row with the new/old ratio of
# requests/s, p99 and server CPU per request (above 1: more requests/s, a
# longer p99, more CPU), and one of nginx vs new; its idle-connections
# part runs old and new. The
# query section measures the old binary's private memory on its journal
# (OLD=REV bench/run.sh query); the https section runs the old binary
# before the new one in each round and prints new/old, and so does the
# durable section (in memory, --sync always and never); the other sections
# ignore OLD, and the budgets skip the pinned rows (they are judged against the reference).
# Without OLD nothing changes. OLD=HEAD (with nothing changed since) shows
# how far two runs of one build differ. With OLD the pinned section runs
# nginx's canned 200 too, after new, and prints new/nginx.
#
# BASELINE (default 7e46974, the build before the name order, the Date
# line and the throttle's proofs joined every POST; BASELINE= for none) is
# the pinned section's standing comparison,
# with or without OLD: a revision built by bench/build-old.sh (or a
# binary's path) run in each round and connection count before the others,
# and printed as a table of its own, baseline vs new, beside OLD's. Each
# change is reported against its parent (OLD), and the sum of all of them
# against the baseline, so that small costs cannot add up unseen. When OLD
# is the baseline's binary it runs once and both tables read its rows.
set -euo pipefail
# OLD and BASELINE as paths are taken from where the script was started.
[ -z "${OLD:-}" ] || [ ! -e "$OLD" ] || OLD=$(realpath "$OLD")
[ -z "${BASELINE:-}" ] || [ ! -e "$BASELINE" ] || BASELINE=$(realpath "$BASELINE")
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
  SECTIONS=(reference footprint durable startup restart writers compaction export pinned https feed query hostile budgets)

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

# The earlier build the pinned, durable, https and query sections compare
# with (OLD), if any.
OLD_BIN=
if [ -n "${OLD:-}" ] && [[ " ${SECTIONS[*]} " =~ " "(pinned|durable|https|query|hostile)" " ]]; then
  if [ -f "$OLD" ] && [ -x "$OLD" ]; then
    OLD_BIN=$OLD
  elif git rev-parse --verify --quiet "$OLD^{commit}" >/dev/null; then
    OLD_BIN=$(bench/build-old.sh "$OLD")
  else
    echo "OLD=$OLD is neither an executable file nor a git revision" >&2
    exit 2
  fi
fi
# The pinned section's standing comparison (BASELINE), if any; OLD_BIN
# itself when they are the same bytes (run once, both tables read it).
BASELINE=${BASELINE-7e46974}
BASELINE_BIN=
if [ -n "$BASELINE" ] && [[ " ${SECTIONS[*]} " == *" pinned "* ]]; then
  if [ -f "$BASELINE" ] && [ -x "$BASELINE" ]; then
    BASELINE_BIN=$BASELINE
  elif git rev-parse --verify --quiet "$BASELINE^{commit}" >/dev/null; then
    BASELINE_BIN=$(realpath "$(bench/build-old.sh "$BASELINE")")
  else
    echo "BASELINE=$BASELINE is neither an executable file nor a git revision" >&2
    exit 2
  fi
  [ -z "$OLD_BIN" ] || ! cmp -s "$OLD_BIN" "$BASELINE_BIN" || BASELINE_BIN=$OLD_BIN
fi

# Every figure is of the binary as published (scripts/release/release-build.sh:
# std rebuilt without the backtrace symboliser), the default build (it
# serves HTTPS too; plain HTTP unless given a certificate); the size of a
# plain `cargo build --release` is reported beside it, and the footprint
# section measures the plain build (FEATURES=plain: HTTP only) as well.
HOST=$(uname -m)-unknown-linux-gnu
scripts/release/release-build.sh "$HOST" >/dev/null
PLAIN_BIN=target/plain/$HOST/release/plantstore
if [[ " ${SECTIONS[*]} " == *" footprint "* ]]; then
  FEATURES=plain scripts/release/release-build.sh "$HOST" >/dev/null
fi
cargo build --release --quiet --bin plantstore --example make_journal --example feed_load
cargo build --release --quiet --manifest-path bench/reference/Cargo.toml
BIN=target/$HOST/release/plantstore
# The postgres build (--database), as published: only for that section,
# and for the query section's PostgreSQL part.
PG_BIN=
if [[ " ${SECTIONS[*]} " == *" postgres "* ]] ||
  { [[ " ${SECTIONS[*]} " == *" query "* ]] && [ -n "${PLANTSTORE_TEST_DATABASE:-}" ]; }; then
  FEATURES=postgres scripts/release/release-build.sh "$HOST" >/dev/null
  PG_BIN=target/postgres/$HOST/release/plantstore
fi
REFERENCE=bench/reference/target/release/plantstore-reference
WORK=$(mktemp -d)

# The helpers, then one file per section (each defines section_NAME),
# named one by one so that `shellcheck -x bench/run.sh` reads them all.
# shellcheck source=bench/lib/common.sh
source bench/lib/common.sh
# shellcheck source=bench/lib/pg.sh
source bench/lib/pg.sh
# shellcheck source=bench/lib/pinned.sh
source bench/lib/pinned.sh
# shellcheck source=bench/lib/writer.sh
source bench/lib/writer.sh
# shellcheck source=bench/sections/budgets.sh
source bench/sections/budgets.sh
# shellcheck source=bench/sections/compaction.sh
source bench/sections/compaction.sh
# shellcheck source=bench/sections/durable.sh
source bench/sections/durable.sh
# shellcheck source=bench/sections/export.sh
source bench/sections/export.sh
# shellcheck source=bench/sections/feed.sh
source bench/sections/feed.sh
# shellcheck source=bench/sections/footprint.sh
source bench/sections/footprint.sh
# shellcheck source=bench/sections/hostile.sh
source bench/sections/hostile.sh
# shellcheck source=bench/sections/https.sh
source bench/sections/https.sh
# shellcheck source=bench/sections/pinned.sh
source bench/sections/pinned.sh
# shellcheck source=bench/sections/postgres.sh
source bench/sections/postgres.sh
# shellcheck source=bench/sections/query.sh
source bench/sections/query.sh
# shellcheck source=bench/sections/reference.sh
source bench/sections/reference.sh
# shellcheck source=bench/sections/restart.sh
source bench/sections/restart.sh
# shellcheck source=bench/sections/startup.sh
source bench/sections/startup.sh
# shellcheck source=bench/sections/writers.sh
source bench/sections/writers.sh
for section in "${SECTIONS[@]}"; do
  declare -F "section_$section" >/dev/null ||
    { echo "no section $section (bench/sections/$section.sh)" >&2; exit 2; }
done

echo "# plantstore $(grep -m1 '^version' Cargo.toml | cut -d'"' -f2) benchmarks, $(nproc) cores, $(date -u +%Y-%m-%d)"
echo
for section in "${SECTIONS[@]}"; do
  "section_$section"
done
