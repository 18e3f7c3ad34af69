# The startup section of bench/run.sh (`bench/run.sh startup`): start-up
# time with a journal of $PLANTS plants, and the peak RSS during start-up
# against the RSS once started. The figures the budgets section judges:
# STARTUP_MAX and STARTUP_PEAK_OVER. Sourced by bench/run.sh after
# bench/lib/*.sh, whose helpers it calls.
# shellcheck shell=bash

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
