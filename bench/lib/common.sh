# bench/run.sh's shared helpers, sourced by it before any section: the
# processes a run starts (SERVER_PID, HOLD_PID, LOAD_PIDS, EXTRA_PIDS) and
# their cleanup, starting and stopping plantstore and the reference on a
# free loopback port, one wrk run (post), the sums the budgets read (SUM,
# add, mean), and the server's memory as /proc reports it (RSS, private,
# peak). Every section calls these; none keeps its own copy.
# shellcheck shell=bash

SERVER_PID=
HOLD_PID=
# Client loops running in the background (the writers section).
LOAD_PIDS=()
# A command prefix for the servers started (the pinned section: taskset).
PIN=()
# Processes started beside SERVER_PID (the postgres section: its
# instances and nginx).
EXTRA_PIDS=()
# Under set -e a failing `wait` (the status of a killed process) would end
# the trap early, so every step here is allowed to fail.
cleanup() {
  local pid
  for pid in "${LOAD_PIDS[@]}" "${EXTRA_PIDS[@]}" $HOLD_PID $SERVER_PID; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

# start_server ARGS...: starts plantstore on a free loopback port (access
# log off: it would cost the server CPU; LOG_LEVEL=info turns it and the
# other info lines on); sets SERVER_PID, ADDR and STARTUP_MS (spawn until
# the port accepts a connection).
# start_reference: the same for the reference server. Both run under
# ${PIN[@]} when set.
start_server() {
  free_port
  local started
  started=$(date +%s%N)
  PLANTSTORE_TOKEN=$TOKEN "${PIN[@]}" "$BIN" --addr "$ADDR" --log-level "${LOG_LEVEL:-warn}" \
    --max-plants 100000000 "$@" 2>"$WORK/server.log" &
  SERVER_PID=$!
  wait_port "$started"
}

start_reference() {
  free_port
  local started
  started=$(date +%s%N)
  PLANTSTORE_TOKEN=$TOKEN "${PIN[@]}" "$REFERENCE" "$ADDR" 100000000 2>"$WORK/server.log" &
  SERVER_PID=$!
  wait_port "$started"
}

free_port() {
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  ADDR=127.0.0.1:$PORT
}

wait_port() {
  local started=$1 port=$PORT
  for _ in $(seq 1 5000); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log" >&2; exit 1; }
    sleep 0.002
  done
  STARTUP_MS=$(( ($(date +%s%N) - started) / 1000000 ))
}

stop_server() {
  kill "$SERVER_PID" && wait "$SERVER_PID" || true
  SERVER_PID=
}

# post CONNS [SCRIPT]: warm-up, then one wrk run; sets RPS, P50, P99 (ms),
# ERRORS and REQUESTS. With MEASURE set (a command), `$MEASURE start` and
# `$MEASURE stop` run just before and after the measured run.
post() {
  local conns=$1 script=${2:-bench/post.lua} result threads=2
  [ "$conns" -ge 2 ] || threads=1
  PLANTSTORE_TOKEN=$TOKEN wrk -t$threads -c"$conns" -d2s -s "$script" "http://$ADDR" >/dev/null
  [ -z "${MEASURE:-}" ] || $MEASURE start
  result=$(PLANTSTORE_TOKEN=$TOKEN wrk -t$threads -c"$conns" -d"$DURATION" -s "$script" \
    "http://$ADDR" | grep '^RESULT')
  [ -z "${MEASURE:-}" ] || $MEASURE stop
  read -r _ RPS P50 P99 ERRORS REQUESTS MAX <<<"$result"
  P50=$(awk "BEGIN{printf \"%.2f\", $P50/1000}")
  P99=$(awk "BEGIN{printf \"%.2f\", $P99/1000}")
}

# two EXPR: an arithmetic expression's value to two places.
two() { awk "BEGIN{printf \"%.2f\", $1}"; }
ratio() { awk "BEGIN{if ($2 == 0) print \"-\"; else printf \"%.2f\", $1/$2}"; }
# add KEY VALUE: SUM[KEY] += VALUE.
add() { SUM[$1]=$(awk "BEGIN{print ${SUM[$1]:-0} + $2}"); }
mean() { awk "BEGIN{printf \"%.${2:-2}f\", ${SUM[$1]}/$ROUNDS}"; }
plants_stored() {
  curl -sf -H "Authorization: Bearer $TOKEN" "http://$ADDR/metrics" |
    awk '/^plantstore_plants /{print $2}'
}
rss_kib() { awk '/VmRSS/{print $2}' "/proc/$SERVER_PID/status"; }
# Sums of figures per server and connection count, for the budgets.
declare -A SUM

# peak_rss_while PID: the largest RSS of the server (KiB) seen while PID
# runs, polled every 10 ms.
peak_rss_while() {
  local peak=0 rss
  while kill -0 "$1" 2>/dev/null; do
    rss=$(rss_kib)
    [ "$rss" -gt "$peak" ] && peak=$rss
    sleep 0.01
  done
  echo "$peak"
}

# peak_rss_kib: the server's peak RSS since start, or since the last
# `echo 5 > /proc/PID/clear_refs`.
peak_rss_kib() { awk '/VmHWM/{print $2}' "/proc/$SERVER_PID/status"; }

# ms MICROSECONDS: milliseconds, three decimals.
ms() { awk "BEGIN{printf \"%.3f\", $1/1000}"; }

# seconds DURATION: a wrk duration (10, 10s, 2m) in whole seconds.
seconds() {
  case $1 in
    *m) echo $((${1%m} * 60)) ;;
    *s) echo "${1%s}" ;;
    *) echo "$1" ;;
  esac
}

# anon_kib: the server's private memory (RssAnon: its anonymous pages, not
# the files mapped in), KiB: what the spec's memory budgets count.
anon_kib() { awk '/RssAnon/{print $2}' "/proc/$SERVER_PID/status"; }

# side_wrk ADDR DURATION OUT: wrk -t1 -c64 against ADDR, on CPU $SIDE_CPU
# where that is set; its RESULT line in OUT.
side_wrk() {
  local pin=()
  [ -z "${SIDE_CPU:-}" ] || pin=(taskset -c "$SIDE_CPU")
  PLANTSTORE_TOKEN=$TOKEN ${pin[@]+"${pin[@]}"} wrk -t1 -c64 -d"$2" -s bench/post.lua "http://$1" |
    grep '^RESULT' >"$3"
}

# side_pair ADDR ADDR DURATION: side_wrk against both at once, their
# RESULT lines in $WORK/side.1 and $WORK/side.2.
side_pair() {
  local a b
  side_wrk "$1" "$3" "$WORK/side.1" &
  a=$!
  side_wrk "$2" "$3" "$WORK/side.2" &
  b=$!
  wait "$a" "$b" || true
}

# side_us TICKS RESULT_FILE: server CPU µs per request of that run.
side_us() {
  local requests
  read -r _ _ _ _ _ requests _ <"$2"
  awk "BEGIN{printf \"%.2f\", $1 * 1000000 / $CLK_TCK / ($requests > 0 ? $requests : 1)}"
}

# median KEY [PLACES]: the median of the values VALUES[KEY] holds (one a
# round; the mean of the middle two for an even count).
median() {
  tr ' ' '\n' <<<"${VALUES[$1]}" | sort -g | awk -v places="${2:-1}" \
    '{v[NR] = $1} END{m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
      printf "%.*f", places, m}'
}
# range KEY: the smallest and the largest of VALUES[KEY], as "min–max".
range() {
  tr ' ' '\n' <<<"${VALUES[$1]}" | sort -g | awk '{v[NR] = $1} END{printf "%s–%s", v[1], v[NR]}'
}
# keep KEY VALUE: adds this round's VALUE to VALUES[KEY].
keep() { VALUES[$1]="${VALUES[$1]:+${VALUES[$1]} }$2"; }
declare -A VALUES
