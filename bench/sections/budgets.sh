# The budgets section of bench/run.sh (`bench/run.sh budgets`, last by
# default): every budget of the spec, met or not, from the figures the
# sections before it set in this shell. The judging is bench/budgets.py's;
# this hands it those figures as NAME=VALUE lines (SUM[KEY] as SUM.KEY). A
# section not run sets none, and its rows are left out.
# shellcheck shell=bash

# The figures bench/budgets.py reads, besides the sums.
BUDGET_FIGURES=(ROUNDS PLANTS HOST IDLE_CONNS STATIC_TARGET
  SIZE HTTPS_SIZE IDLE IDLE_ANON IDLE_DATA IDLE_DATA_ANON IDLE_STATIC IDLE_STATIC_ANON
  LOADED LOADED_ANON HTTPS_KEEPALIVE HTTPS_NEW HTTPS_REUSE TLS_IDLE_GROWTH
  PG_RATIO PG_CONNS PG_ONE_CPU_US PG_ONE_PG_US HEALTH_MAX DURABLE_RATIO DURABLE_CPU_RATIO
  DURABLE_NEVER_CPU_RATIO DURABLE_NEVER_CPU_RANGE
  STARTUP_MAX STARTUP_PEAK_OVER RESTART_MAX WRITERS_MAX
  QUERY_ORDER_BYTES QUERY_ORDER_HOW QUERY_ORDER_AT QUERY_PG_TRGM COMPACT_PEAK_GROWTH
  FEED_IDLE_RATIO FEED_COMPLETE FEED_DELAY_P99 HOLD_GROWTH HOLD_HELD HOLD_P99)

section_budgets() {
  local name key
  {
    for name in "${BUDGET_FIGURES[@]}"; do
      [ -z "${!name:-}" ] || echo "$name=${!name}"
    done
    [ -z "${COMPACT_HOLDS[*]:-}" ] || echo "COMPACT_HOLDS=${COMPACT_HOLDS[*]}"
    for key in "${!SUM[@]}"; do echo "SUM.$key=${SUM[$key]}"; done
  } >"$WORK/budgets.figures"
  python3 bench/budgets.py "$WORK/budgets.figures"
}
