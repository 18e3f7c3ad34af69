# The writers section of bench/run.sh (`bench/run.sh writers`): one writer
# loop (PUT /plants/{id}, wrk -c1) on a server with $PLANTS plants (--data,
# --sync never), alone and under 4 looping worst-case listings (one loop
# each, see LISTINGS below), $ROUNDS rounds: the writer's p50, p99, max;
# then the same with 256 KiB pages: 3,000 plants of 2,000-byte names in
# memory (--max-name 65500), 4 loops of GET /plants?limit=1000 (each page
# ends at its 256 KiB cap). The figures the budgets section judges:
# SUM[writers.*] and WRITERS_MAX. Sourced by bench/run.sh after
# bench/lib/*.sh, whose helpers it calls.
# shellcheck shell=bash

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
