# The pinned section of bench/run.sh (`bench/run.sh pinned`): one core each:
# the server on CPU 0, wrk on CPU 1; POST /plants at 16, 64 and 1024
# connections, plantstore (with $PINNED_ARGS, default "--threads 1"; a token
# file of the write token and a read token, and the auth-failure limit on,
# its table not empty: see start_pinned) vs the reference vs nginx answering
# a canned 200 (one worker), $ROUNDS rounds: req/s, p50, p99, errors, server
# CPU and context switches per request; then RSS with $IDLE_CONNS (default
# 10000) idle keep-alive connections open (bench/hold.py) and a fresh
# client's latency meanwhile. With OLD: old, new and nginx, and a table of
# new/old and one of new/nginx. With BASELINE (bench/run.sh's header:
# 7e46974 unless set) the baseline build runs first in each round and
# connection count, and a table of new/baseline follows, so that what every
# change since has added to a POST stays in sight; its rows are OLD's
# when the two are one binary. The figures the budgets section judges:
# SUM[pinned.*] and HOLD_GROWTH, HOLD_HELD, HOLD_P99. Sourced by
# bench/run.sh after bench/lib/*.sh, whose helpers it calls.
# shellcheck shell=bash

# label SERVER: the pinned section's name for a server: old and new when
# OLD is set.
label() {
  case $1 in
    old) echo old ;;
    baseline) echo "baseline ($BASELINE)" ;;
    plantstore) if [ -n "$OLD_BIN" ]; then echo new; else echo plantstore; fi ;;
    *) echo "$1" ;;
  esac
}

# describe_binaries: the old (or baseline) and new binaries, their sizes
# and the ratios.
describe_binaries() {
  local new rev name bin size same
  new=$(stat -c %s "$BIN")
  rev=$(git describe --always --dirty 2>/dev/null || echo "?")
  for name in old baseline; do
    bin=$OLD_BIN
    [ $name = old ] || bin=$BASELINE_BIN
    [ -n "$bin" ] || continue
    size=$(stat -c %s "$bin") same=
    cmp -s "$bin" "$BIN" && same=" (the same bytes)"
    echo "$(label $name) \`$(realpath --relative-base=. "$bin")\` $size bytes, new/$name size $(ratio "$new" "$size")$same;"
  done
  echo "new \`$BIN\` ($rev) $new bytes."
}

# compare_table OTHER: OTHER (old, baseline or nginx) vs new, one row per
# round and connection count from PAIR, then (over 2 rounds or more)
# their means, each with its new/OTHER ratios. The baseline's figures are
# old's when the two are one binary.
compare_table() {
  local other=$1 from=$1 round conns figure places o n row rows
  [ "$other" != baseline ] || [ "$BASELINE_BIN" != "$OLD_BIN" ] || from=old
  mapfile -t rows < <(seq 1 "$ROUNDS")
  [ "$ROUNDS" -eq 1 ] || rows+=(mean)
  echo "## $(label "$other") vs new: POST /plants on one core each, new/$other per row"
  echo
  echo "Above 1: more requests/s, a longer p99, more server CPU per request."
  echo
  echo "| round | connections | $other requests/s | new requests/s | new/$other | $other p99 ms | new p99 ms | new/$other | $other CPU µs/request | new CPU µs/request | new/$other |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  for round in "${rows[@]}"; do
    for conns in 16 64 1024; do
      row="| $round | $conns |"
      for figure in rps:0 p99:3 cpu:1; do
        places=${figure#*:} figure=${figure%:*}
        if [ "$round" = mean ]; then
          o=$(mean "pinned.$from.$conns.$figure" "$places")
          n=$(mean "pinned.plantstore.$conns.$figure" "$places")
        else
          o=${PAIR[$round.$conns.$from.$figure]} n=${PAIR[$round.$conns.plantstore.$figure]}
        fi
        row+=" $o | $n | $(ratio "$n" "$o") |"
      done
      echo "$row"
    done
  done
  echo
}
# The pinned section's figures by round, connection count, server and
# figure, for compare_table.
declare -A PAIR

section_pinned() {
  need_nginx
  CLK_TCK=$(getconf CLK_TCK)
  local hard
  hard=$(ulimit -Hn)
  [ "$hard" = unlimited ] && hard=1048576
  ulimit -n "$hard" 2>/dev/null || true
  local servers=(plantstore reference nginx)
  [ -z "$OLD_BIN" ] || servers=(old plantstore nginx)
  [ -z "$BASELINE_BIN" ] || [ "$BASELINE_BIN" = "$OLD_BIN" ] || servers=(baseline "${servers[@]}")

  echo "## POST /plants on one core each: server on CPU 0, wrk -t1 on CPU 1 ($DURATION, $ROUNDS rounds)"
  echo
  if [ -n "$OLD_BIN$BASELINE_BIN" ]; then
    describe_binaries
    echo "Every plantstore with the flags \`${PINNED_ARGS:-(none)}\`, in the order of the rows."
  else
    echo "plantstore flags: \`${PINNED_ARGS:-(none)}\`."
  fi
  echo "nginx: one process, a canned 200 JSON."
  echo "plantstore: a token file of the write token and a read token (a build without"
  echo "token scopes: PLANTSTORE_TOKEN alone), and 20 wrong tokens from 127.0.0.2 before"
  echo "each run, so that its auth-failure table is not empty."
  echo "Server CPU and context switches are over the measured run, per request."
  echo
  echo "| round | connections | server | requests/s | p50 ms | p99 ms | errors | server CPU µs/request | context switches/request |"
  echo "|---|---|---|---|---|---|---|---|---|"
  local round conns server
  for round in $(seq 1 "$ROUNDS"); do
    for conns in 16 64 1024; do
      for server in "${servers[@]}"; do
        start_pinned "$server"
        pinned_run "$conns"
        stop_server
        add "pinned.$server.$conns.rps" "$RPS"
        add "pinned.$server.$conns.p99" "$P99"
        add "pinned.$server.$conns.cpu" "$CPU_US"
        add "pinned.$server.$conns.ctx" "$CTX"
        PAIR[$round.$conns.$server.rps]=$RPS PAIR[$round.$conns.$server.p99]=$P99
        PAIR[$round.$conns.$server.cpu]=$CPU_US
        echo "| $round | $conns | $(label "$server") | $RPS | $P50 | $P99 | $ERRORS | $CPU_US | $CTX |"
      done
    done
  done
  echo
  [ -z "$OLD_BIN" ] || compare_table old
  [ -z "$BASELINE_BIN" ] || compare_table baseline
  compare_table nginx
  pinned_idle
}

# pinned_idle: RSS with $IDLE_CONNS idle keep-alive connections open, and
# a fresh client's latency meanwhile (plantstore and the reference, or old
# and new); sets HOLD_GROWTH, HOLD_HELD and HOLD_P99 for the budgets.
pinned_idle() {
  echo "## $IDLE_CONNS idle keep-alive connections (server on CPU 0, bench/hold.py and wrk on CPU 1)"
  echo
  echo "Each connection sent one \`GET /healthz\` and read its reply, then stays open;"
  echo "meanwhile a fresh client: wrk -t1 -c4 POST /plants, 2 s warm-up, $DURATION."
  echo "plantstore flags: \`${PINNED_ARGS:+$PINNED_ARGS }--max-connections 20000 --idle-timeout 600\`."
  echo
  if [ "$(ulimit -n)" -le $((IDLE_CONNS + 100)) ]; then
    echo "Skipped: open-file limit $(ulimit -n) is too low for $IDLE_CONNS connections."
    echo
    return
  fi
  echo "| server | RSS before, KiB | RSS with them open, KiB | growth, KiB | held | closed by the server meanwhile | fresh client requests/s | p50 ms | p99 ms | errors |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  local before with held failed closed server servers
  servers=(plantstore reference)
  [ -z "$OLD_BIN" ] || servers=(old plantstore)
  for server in "${servers[@]}"; do
    if [ $server = reference ]; then
      start_pinned reference
    else
      start_pinned "$server" --max-connections 20000 --idle-timeout 600
    fi
    sleep 0.5
    before=$(rss_kib)
    hold "$WORK/hold.out" python3 bench/hold.py "$ADDR" "$IDLE_CONNS"
    read -r _ held failed <<<"$(grep '^ready' "$WORK/hold.out" || echo "ready 0 $IDLE_CONNS")"
    sleep 1
    with=$(rss_kib)
    pinned_run 4
    kill "$HOLD_PID" 2>/dev/null || true
    wait "$HOLD_PID" || true
    HOLD_PID=
    closed=$(awk '/^closed/{print $2}' "$WORK/hold.out")
    stop_server
    echo "| $(label "$server") | $before | $with | $((with - before)) | $held ($failed failed) | ${closed:-?} | $RPS | $P50 | $P99 | $ERRORS |"
    if [ $server = plantstore ]; then
      HOLD_GROWTH=$((with - before)) HOLD_HELD=$held HOLD_P99=$P99
    fi
  done
  echo
}
