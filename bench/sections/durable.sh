# The durable section of bench/run.sh (`bench/run.sh durable`): POST /plants
# in memory vs --data (sync always and never). The figures the budgets
# section judges: DURABLE_RATIO. Sourced by bench/run.sh after
# bench/lib/*.sh, whose helpers it calls.
# shellcheck shell=bash

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
