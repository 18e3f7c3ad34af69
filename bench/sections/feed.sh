# The feed section of bench/run.sh (`bench/run.sh feed`): the change feed
# (examples/feed_load, a native reader): POST at 64 connections without
# subscribers, with 100 idle ones (following a tag the POSTs do not carry)
# and with 100 receiving every change, $ROUNDS rounds; RSS per subscriber
# with 1,000 open; then 100 subscribers at 5,000 creates/s and 1,000 at
# 500/s for $FEED_SECONDS s (default 5): whether each got every event in
# order, the delay from a create's answer to its event, and the feed's
# server CPU per delivered event. The figures the budgets section judges:
# FEED_IDLE_RATIO, FEED_COMPLETE and FEED_DELAY_P99. Sourced by bench/run.sh
# after bench/lib/*.sh, whose helpers it calls.
# shellcheck shell=bash

# feed_run SUBSCRIBERS RATE: a fresh server in memory, SUBSCRIBERS streams
# and RATE creates a second for FEED_SECONDS (examples/feed_load); sets
# FEED_RESULT (its RESULT line, without the word) and FEED_TICKS (server
# CPU over the run, in clock ticks).
feed_run() {
  local ticks
  start_server
  ticks=$(cpu_ticks)
  FEED_RESULT=$(target/release/examples/feed_load "$ADDR" "$TOKEN" "$1" "$2" "$FEED_SECONDS" |
    sed -n 's/^RESULT //p')
  FEED_TICKS=$(($(cpu_ticks) - ticks))
  stop_server
}

section_feed() {
  CLK_TCK=$(getconf CLK_TCK)
  local round rps_none rps_idle rps_all
  echo "## The change feed: POST at 64 connections with 100 subscribers open (wrk -t2, $DURATION)"
  echo
  echo "Idle: 100 streams following a tag the POSTs do not carry (?tag=idle): open,"
  echo "woken each round, sent nothing. Receiving: 100 streams of every change, so"
  echo "each POST is 100 events sent, and read by 100 reader threads on the same cores."
  echo
  echo "| round | without | with 100 idle | ratio | with 100 receiving every change | ratio |"
  echo "|---|---|---|---|---|---|"
  for round in $(seq 1 "$ROUNDS"); do
    start_server
    post 64; rps_none=$RPS
    hold "$WORK/hold.out" target/release/examples/feed_load "$ADDR" "$TOKEN" 100 --hold idle
    post 64; rps_idle=$RPS
    kill "$HOLD_PID" && wait "$HOLD_PID" 2>/dev/null || true
    hold "$WORK/hold.out" target/release/examples/feed_load "$ADDR" "$TOKEN" 100 --hold
    post 64; rps_all=$RPS
    kill "$HOLD_PID" && wait "$HOLD_PID" 2>/dev/null || true
    HOLD_PID=
    stop_server
    add feed.none "$rps_none"; add feed.idle "$rps_idle"; add feed.all "$rps_all"
    echo "| $round | $rps_none | $rps_idle | $(ratio "$rps_idle" "$rps_none") | $rps_all | $(ratio "$rps_all" "$rps_none") |"
  done
  FEED_IDLE_RATIO=$(ratio "${SUM[feed.idle]}" "${SUM[feed.none]}")
  echo
  feed_memory
  feed_delivery
}

# feed_memory: 1,000 subscribers held on a fresh server: the RSS they add.
feed_memory() {
  local before held
  start_server
  before=$(rss_kib)
  hold "$WORK/hold.out" target/release/examples/feed_load "$ADDR" "$TOKEN" 1000 --hold
  held=$(rss_kib)
  kill "$HOLD_PID" && wait "$HOLD_PID" 2>/dev/null || true
  HOLD_PID=
  stop_server
  FEED_SUB_KIB=$(awk "BEGIN{printf \"%.1f\", ($held - $before) / 1000}")
  echo "1,000 open streams: RSS $before -> $held KiB, $FEED_SUB_KIB KiB per subscriber"
  echo
}

# feed_delivery: 100 subscribers at 5,000 creates/s and 1,000 at 500/s:
# whether each got every event, in order, the delay, the feed's CPU; sets
# FEED_COMPLETE and FEED_DELAY_P99.
feed_delivery() {
  local subs_rate subs rate changes complete min max p50 p99 max_ms
  echo "## The change feed: delivery (examples/feed_load, a native reader; creates for ${FEED_SECONDS}s)"
  echo
  echo "| subscribers | changes/s | changes | got every event, in order | events per subscriber (min-max) | delay p50 / p99 / max ms | feed CPU per delivered event |"
  echo "|---|---|---|---|---|---|---|"
  FEED_COMPLETE=1 FEED_DELAY_P99=0
  for subs_rate in 100:5000 1000:500; do
    subs=${subs_rate%:*} rate=${subs_rate#*:}
    # The same creates with no subscriber: what the feed's CPU adds.
    feed_run 0 "$rate"
    local base_ticks=$FEED_TICKS
    feed_run "$subs" "$rate"
    read -r changes _ complete min max p50 p99 max_ms <<<"$FEED_RESULT"
    local cpu
    cpu=$(awk "BEGIN{d = $FEED_TICKS - $base_ticks; if (d < 0) d = 0; printf \"%.2f\", d * 1e6 / $CLK_TCK / ($changes * $subs)}")
    echo "| $subs | $rate | $changes | $complete of $subs | $min-$max | $p50 / $p99 / $max_ms | $cpu µs |"
    [ "$complete" = "$subs" ] || FEED_COMPLETE=0
    FEED_DELAY_P99=$(awk "BEGIN{print ($p99 > $FEED_DELAY_P99) ? $p99 : $FEED_DELAY_P99}")
  done
  echo
  echo "The delay runs from a create's answer reaching its writer to its event reaching"
  echo "a subscriber; the feed's CPU is the server's CPU over the run less that of the"
  echo "same creates with no subscriber, per event delivered."
  echo
}
