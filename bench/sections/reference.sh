# The reference section of bench/run.sh (`bench/run.sh reference`): POST
# /plants in memory, plantstore vs the axum + tokio reference
# (bench/reference), at 16 and 64 connections, alternating servers for
# $ROUNDS rounds (default 2). The figures the budgets section judges:
# SUM[plantstore|reference.CONNS.rps|p99|errors]. Sourced by bench/run.sh
# after bench/lib/*.sh, whose helpers it calls.
# shellcheck shell=bash

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
