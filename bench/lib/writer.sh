# The writer loop of bench/run.sh (PUT /plants/{id}, one connection) alone
# and under looping listings: shared by the writers and query sections,
# which judge the same writer under different readers.
# shellcheck shell=bash

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
