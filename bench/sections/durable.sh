# The durable section of bench/run.sh (`bench/run.sh durable`): POST /plants
# in memory vs --data (sync always and never): throughput, latency and the
# server's CPU per request. The figures the budgets section judges:
# DURABLE_RATIO and DURABLE_CPU_RATIO (--sync always at 64 connections
# against in memory). Sourced by bench/run.sh after bench/lib/*.sh, whose
# helpers it calls.
# shellcheck shell=bash

# server_cpu start|stop: post's MEASURE: the server's CPU over the measured
# run, in clock ticks (CPU_SPENT).
server_cpu() {
  if [ "$1" = start ]; then CPU_START=$(cpu_ticks); else CPU_SPENT=$(($(cpu_ticks) - CPU_START)); fi
}

# durable_post CONNS: post with the server's CPU measured; sets CPU_US
# (µs per request) besides post's figures.
durable_post() {
  MEASURE=server_cpu post "$1"
  CPU_US=$(awk "BEGIN{printf \"%.1f\", $CPU_SPENT * 1e6 / $CLK_TCK / ($REQUESTS > 0 ? $REQUESTS : 1)}")
}

section_durable() {
  CLK_TCK=$(getconf CLK_TCK)
  echo "## POST /plants: in memory vs --data (wrk -t2, $DURATION)"
  echo
  echo "| storage | connections | requests/s | p50 ms | p99 ms | errors | vs in memory | server CPU µs/request | vs in memory |"
  echo "|---|---|---|---|---|---|---|---|---|"
  local conns mem mem_cpu sync
  for conns in 16 64; do
    start_server
    durable_post "$conns"; mem=$RPS mem_cpu=$CPU_US
    echo "| in memory | $conns | $RPS | $P50 | $P99 | $ERRORS | 1.00 | $CPU_US | 1.00 |"
    stop_server
    for sync in always never; do
      rm -f "$WORK/bench.journal"
      start_server --data "$WORK/bench.journal" --sync "$sync"
      durable_post "$conns"
      echo "| --data, --sync $sync | $conns | $RPS | $P50 | $P99 | $ERRORS | $(ratio "$RPS" "$mem") | $CPU_US | $(ratio "$CPU_US" "$mem_cpu") |"
      if [ "$sync.$conns" = always.64 ]; then
        DURABLE_RATIO=$(ratio "$RPS" "$mem") DURABLE_CPU_RATIO=$(ratio "$CPU_US" "$mem_cpu")
      fi
      stop_server
    done
  done
  echo
}
