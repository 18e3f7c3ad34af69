# The query section of bench/run.sh (`bench/run.sh query`; bench/lib/*.sh
# own the helpers it calls: start_server, writer_run, writer_under, pg_db,
# add, mean...): listings in name order and searches, and what they cost,
# on $PLANTS plants with short names: make_journal --marked 10000 names
# them "plant 0" to "plant 999999" and one in 10,000 "plant 9999 fern", so
# that `?q=fern` matches one plant in 10,000 and its first page (100
# plants at 1,000,000) is a scan of every plant. The memory store runs on
# that journal (--data, --sync never, as in the writers section); with
# PLANTSTORE_TEST_DATABASE the postgres build runs on a database seeded
# with the same plants. Pages and searches are timed for one client
# (wrk -t1 -c1): a latency, not a throughput.
# The QUERY_* figures it sets are read by bench/run.sh's budgets section.
# shellcheck shell=bash disable=SC2034

QUERY_FIRST="/plants?sort=name&limit=100"
QUERY_SEARCH="/plants?q=fern&limit=100"

section_query() {
  local journal=$WORK/query.journal seed=$WORK/query.ndjson round
  target/release/examples/make_journal "$journal" "$PLANTS" --marked 10000
  echo "## Queries on $PLANTS plants with short names ($DURATION, $ROUNDS rounds)"
  echo
  echo "A journal of make_journal \`--marked 10000\`: \"plant 0\", \"plant 1\", ..., one in"
  echo "10,000 \"plant 9999 fern\". The in-memory POST path is compared by the pinned"
  echo "section with OLD (\`OLD=REV bench/run.sh pinned\`: old and new in one run)."
  echo
  query_memory "$journal"
  start_server --data "$journal" --sync never --compact-min 1000000000000
  query_check
  [ -z "$PG_BIN" ] || curl -sf -H "Authorization: Bearer $TOKEN" "http://$ADDR/export" -o "$seed"
  echo "### Memory store (--data, --sync never)"
  echo
  echo "Each run one connection (wrk -t1 -c1), 2 s warm-up, $DURATION. The writer loop is the"
  echo "writers section's (\`PUT /plants/{id}\` of untagged plants, bench/put.lua); the search"
  echo "loops start 2 s before its warm-up."
  echo
  echo "| round | request | requests/s | p50 ms | p99 ms | errors |"
  echo "|---|---|---|---|---|---|"
  for round in $(seq 1 "$ROUNDS"); do
    query_pages memory "$round"
    query_writers "$round"
  done
  stop_server
  echo
  if [ -n "$PG_BIN" ]; then
    query_postgres "$seed"
  else
    echo "PostgreSQL not measured: no PLANTSTORE_TEST_DATABASE (run through scripts/with-postgres.sh)."
    echo
  fi
}

# query_memory JOURNAL: what the name order costs a plant; sets
# QUERY_ORDER_BYTES, QUERY_ORDER_HOW and QUERY_ORDER_AT (plants measured). With OLD: the private memory of
# the old and of the new build, each started on JOURNAL, the difference a
# plant (all that the new build keeps more, the name order first).
# Without: the store's own unit measurement (store::order: its chunks'
# allocations, from their capacities, for 1,000,000 plants), run here.
query_memory() {
  local old new
  start_server --data "$1"
  sleep 1
  new=$(anon_kib)
  stop_server
  echo "New build with the $PLANTS plants: private memory (RssAnon) $new KiB, $((new * 1024 / PLANTS)) bytes a plant (idle memory included)."
  if [ -n "$OLD_BIN" ]; then
    BIN=$OLD_BIN start_server --data "$1"
    sleep 1
    old=$(anon_kib)
    stop_server
    QUERY_ORDER_BYTES=$(awk "BEGIN{printf \"%.1f\", ($new - $old) * 1024 / $PLANTS}")
    QUERY_ORDER_HOW="new - old private memory, old \`$(realpath --relative-base=. "$OLD_BIN")\`"
    QUERY_ORDER_AT=$PLANTS
    echo "Old build (\`$(realpath --relative-base=. "$OLD_BIN")\`): $old KiB. New - old: $QUERY_ORDER_BYTES bytes a plant."
  else
    local out lines
    out=$(cargo test --release --quiet --lib bytes_per_plant_for_a_million_short_names \
      -- --nocapture)
    # "name order, scattered by S: B bytes, F a plant", one line per order
    # of creation: the larger figure is judged.
    lines=$(grep '^name order' <<<"$out") ||
      { echo "no unit measurement of the name order (bytes_per_plant_for_a_million_short_names)" >&2; exit 1; }
    QUERY_ORDER_BYTES=$(sed -n 's/.*, \([0-9.]*\) a plant$/\1/p' <<<"$lines" | sort -g | tail -1)
    QUERY_ORDER_HOW="the store's unit measurement, 1,000,000 plants, the larger of its orders of creation; no OLD"
    QUERY_ORDER_AT=1000000
    echo "No OLD to compare with: the store's own measurement of its name order"
    echo "(\`cargo test --release --lib bytes_per_plant_for_a_million_short_names\`):"
    echo "$(paste -sd ';' <<<"$lines" | sed 's/;/; /g')."
  fi
  echo
}

# query_check: the server at ADDR answers the name order and the search
# (a store that ignored them would time other work): the first names in
# order, the page after "plant 5", and every plant the search finds.
query_check() {
  local found
  found=$(query_ids "/plants?sort=name&limit=3")
  [ "$found" = "0 1 10" ] || { echo "first page in name order: $found" >&2; exit 1; }
  found=$(query_ids "/plants?sort=name&limit=2&after=name%3A5%3A%3Dplant%205")
  [ "$found" = "50 500" ] || { echo "page after plant 5: $found" >&2; exit 1; }
  found=$(query_ids "/plants?q=FERN&limit=1000" | wc -w)
  [ "$found" = $((PLANTS / 10000)) ] || { echo "q=FERN found $found plants" >&2; exit 1; }
}

# query_ids PATH: the ids of the page at ADDR's PATH, on one line.
query_ids() {
  curl -sf -H "Authorization: Bearer $TOKEN" "http://$ADDR$1" |
    python3 -c 'import json, sys; print(*(p["id"] for p in json.load(sys.stdin)))'
}

# query_pages STORE ROUND: one-connection runs at ADDR of the first page
# in name order, of pages after random plants and of the search's first
# page; prints their rows and adds their p99s to
# SUM[query.STORE.first|any|search.p99]. First the first page in id order,
# what a page cost before there were other orders: on a busy machine its
# p99 shows how much of the others' is the machine's.
query_pages() {
  local store=$1 round=$2
  GET_PATH="/plants?limit=100" post 1 bench/get.lua
  query_row "$round" "id order, first page: \`/plants?limit=100\` (for comparison)" "query.$store.id"
  GET_PATH=$QUERY_FIRST post 1 bench/get.lua
  query_row "$round" "first page, \`$QUERY_FIRST\`" "query.$store.first"
  PLANTS=$PLANTS PAGE_PATH=$QUERY_FIRST post 1 bench/name_page.lua
  query_row "$round" "any page: the same after a random plant (bench/name_page.lua)" "query.$store.any"
  GET_PATH=$QUERY_SEARCH post 1 bench/get.lua
  query_row "$round" "search, first page: \`$QUERY_SEARCH\`" "query.$store.search"
}

# query_row ROUND WHAT KEY: the row of the run just made; adds its p99 to
# SUM[KEY.p99].
query_row() {
  add "$3.p99" "$P99"
  echo "| $1 | $2 | $RPS | $P50 | $P99 | $ERRORS |"
}

# query_writers ROUND: the writer loop alone, then under 4 loops of the
# search (writer_under), and what those loops did meanwhile.
query_writers() {
  local round=$1
  writer_run
  add query.alone.p99 "$P99"
  echo "| $round | writer alone | $RPS | $P50 | $P99 | $ERRORS |"
  writer_under "$WORK/search.$round" "$QUERY_SEARCH" "$QUERY_SEARCH" "$QUERY_SEARCH" "$QUERY_SEARCH"
  add query.writer.p99 "$P99"
  echo "| $round | writer under 4 search loops | $RPS | $P50 | $P99 | $ERRORS |"
  cat "$WORK/search.$round".* | awk -v round="$round" '/^RESULT/ {
      rps += $2; errors += $5; if ($3 > p50) p50 = $3; if ($4 > p99) p99 = $4 }
    END { printf "| %s | the 4 search loops meanwhile (whole runs; summed, slowest) | %.0f | %.2f | %.2f | %d |\n",
      round, rps, p50 / 1000, p99 / 1000, errors }'
}

# query_postgres SEED: the postgres build on a fresh database seeded with
# SEED (the memory store's export of the same plants), then ANALYZE (as
# autovacuum soon does after a bulk load: without statistics the planner
# may prefer a scan in id order to the trigram index), and query_pages on
# it for $ROUNDS rounds.
query_postgres() {
  local started tries=0 seconds indexes round
  pg_db
  started=$(date +%s%N)
  BIN=$PG_BIN start_server --database "$PG_URL" --seed "$1"
  # The seed loads before the server listens: longer than start_server waits.
  until (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; do
    tries=$((tries + 1))
    [ "$tries" -le 30 ] || { echo "the PostgreSQL seed did not finish" >&2; exit 1; }
    wait_port "$started"
  done
  seconds=$(awk "BEGIN{printf \"%.1f\", ($(date +%s%N) - $started) / 1e9}")
  psql -q -X -d "$PG_URL" -c "ANALYZE plants"
  indexes=$(psql -X -At -d "$PG_URL" -c \
    "SELECT string_agg(indexname || CASE WHEN indexdef LIKE '%gin_trgm_ops%' THEN ' (trigram)' ELSE '' END, ', ')
     FROM pg_indexes WHERE tablename = 'plants'")
  [[ "$indexes" == *"(trigram)"* ]] && QUERY_PG_TRGM=1
  query_check
  echo "### PostgreSQL $(pg_setting server_version), the same $PLANTS plants"
  echo
  echo "Seeded through \`--seed\` (the memory store's export) in $seconds s, then \`ANALYZE plants\`."
  echo "Indexes on plants: $indexes."
  echo
  echo "| round | request | requests/s | p50 ms | p99 ms | errors |"
  echo "|---|---|---|---|---|---|"
  for round in $(seq 1 "$ROUNDS"); do query_pages postgres "$round"; done
  stop_server
  psql -q -X -d "$PLANTSTORE_TEST_DATABASE" -c "DROP DATABASE plantstore_bench WITH (FORCE)"
  echo
}
