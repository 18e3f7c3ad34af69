# PostgreSQL helpers of bench/run.sh, for the postgres section and the
# query section's PostgreSQL part: a fresh bench database beside
# PLANTSTORE_TEST_DATABASE, more plantstore instances and nginx in front of
# two, and the CPU accounting of every process involved (clock ticks from
# /proc).
# shellcheck shell=bash

# The postgres section's helpers.
# pg_db [NAME]: an empty database NAME (default plantstore_bench) beside
# the one PLANTSTORE_TEST_DATABASE names (the URL's last path segment);
# sets PG_URL to it.
pg_db() {
  local name=${1:-plantstore_bench}
  psql -q -X -v ON_ERROR_STOP=1 -d "$PLANTSTORE_TEST_DATABASE" -c "SET client_min_messages = warning" \
    -c "DROP DATABASE IF EXISTS $name WITH (FORCE)" -c "CREATE DATABASE $name"
  PG_URL=${PLANTSTORE_TEST_DATABASE%/*}/$name
}

# db_backends NAME [APP]: the pids of PostgreSQL's backends connected to
# database NAME (with application_name APP only, if given).
db_backends() {
  psql -X -At -d "$PLANTSTORE_TEST_DATABASE" -v name="$1" -v app="${2:-}" <<<"SELECT pid FROM \
    pg_stat_activity WHERE datname = :'name' AND (:'app' = '' OR application_name = :'app')"
}

# pg_setting NAME: a setting of the database server.
pg_setting() { psql -X -At -d "$PG_URL" -c "SHOW $1"; }

# start_instance CPU ARGS...: one more plantstore (the postgres build when
# ARGS has --database) on CPU (taskset, "" for none), kept in EXTRA_PIDS;
# sets ADDR. Its log is $WORK/instance.PID.log.
start_instance() {
  local cpu=$1 bin=$BIN
  shift
  [[ " $* " == *" --database "* ]] && bin=$PG_BIN
  PIN=()
  [ -z "$cpu" ] || PIN=(taskset -c "$cpu")
  BIN=$bin start_server "$@"
  PIN=()
  # The server keeps writing to the file it opened, renamed.
  mv "$WORK/server.log" "$WORK/instance.$SERVER_PID.log"
  EXTRA_PIDS+=("$SERVER_PID")
  SERVER_PID=
}

# start_proxy A B: nginx in front of the instances at addresses A and B,
# from contrib/nginx-plantstore.conf (@LISTEN@, @INSTANCE_A@ and
# @INSTANCE_B@ replaced), kept in EXTRA_PIDS; sets ADDR to its own address
# and PROXY_PID. A template with an events block is a whole configuration
# and runs as it is, with $WORK/proxy as its prefix (its pid file and logs
# go there, as the template says); otherwise
# it goes in the http block of one of ours: one process (the worker, master
# off), no access log.
start_proxy() {
  local dir=$WORK/proxy template=contrib/nginx-plantstore.conf started
  [ -f "$template" ] || { echo "no $template: the postgres section needs it" >&2; exit 1; }
  mkdir -p "$dir/logs"
  free_port
  sed -e "s/@LISTEN@/$ADDR/g" -e "s/@INSTANCE_A@/$1/g" -e "s/@INSTANCE_B@/$2/g" \
    "$template" >"$dir/plantstore.conf"
  local conf=$dir/plantstore.conf globals="daemon off;"
  if ! grep -Eq '^[[:space:]]*events[[:space:]]*\{' "$conf"; then
    conf=$dir/nginx.conf globals=
    nginx_conf "$dir" "  include $dir/plantstore.conf;"
  fi
  started=$(date +%s%N)
  "$NGINX" -p "$dir/" -c "$conf" -e "$dir/error.log" ${globals:+-g "$globals"} \
    2>"$WORK/server.log" &
  SERVER_PID=$!
  wait_port "$started"
  PROXY_PID=$SERVER_PID
  EXTRA_PIDS+=("$SERVER_PID")
  SERVER_PID=
}

# stop_extra: stops every process in EXTRA_PIDS.
stop_extra() {
  local pid
  for pid in "${EXTRA_PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  EXTRA_PIDS=()
  PROXY_PID=
}

# ticks_of PID...: utime + stime of each process, threads included, summed
# (clock ticks); a process gone counts 0.
# tree_ticks PID: ticks_of the process and its children (nginx's workers).
# shellcheck disable=SC2046
tree_ticks() { ticks_of "$1" $(pgrep -P "$1" || true); }

ticks_of() {
  local pid total=0 t
  for pid in "$@"; do
    t=$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{print $12 + $13}') || t=0
    total=$((total + ${t:-0}))
  done
  echo "$total"
}

# pg_ticks: PostgreSQL's CPU so far: the postmaster, every live child
# (backends, WAL writer, checkpointer...) and the children it reaped.
pg_ticks() {
  local own reaped
  # shellcheck disable=SC2046 # one pid a word
  own=$(ticks_of "$PG_POSTMASTER" $(pgrep -P "$PG_POSTMASTER"))
  reaped=$(sed 's/^.*) //' "/proc/$PG_POSTMASTER/stat" | awk '{print $14 + $15}')
  echo $((own + reaped))
}

# busy_ticks: every CPU's busy time so far (user, nice, system, irq and
# softirq; not idle, iowait or steal).
busy_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat; }

# child_ticks: sets CHILD_TICKS to the CPU of this shell's children that
# have ended (bash's `times`, second line), in clock ticks: between the two
# MEASURE calls of a run, that is wrk (and the grep it pipes to). `times`
# runs in this shell: in a subshell or a pipeline it would count none.
child_ticks() {
  times >"$WORK/times"
  CHILD_TICKS=$(awk -v hz="$CLK_TCK" 'NR == 2 {
    t = 0
    for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); t += p[1] * 60 + p[2] }
    printf "%.0f\n", t * hz
  }' "$WORK/times")
}

# pg_cpu start|stop: the MEASURE of the POST runs; at stop sets CPU_ROW,
# table cells of CPU seconds: each instance in EXTRA_PIDS, PostgreSQL,
# nginx, wrk, everything else, every CPU busy, and what the CPUs had; and
# in clock ticks CPU_FIRST_TICKS (the first instance), CPU_INSTANCES_TICKS
# (every instance), CPU_PG_TICKS and CPU_WRK_TICKS.
pg_cpu() {
  local pid
  if [ "$1" = start ]; then
    declare -gA CPU_AT=([pg]=$(pg_ticks) [busy]=$(busy_ticks))
    for pid in "${EXTRA_PIDS[@]}"; do CPU_AT[$pid]=$(tree_ticks "$pid"); done
    CPU_STARTED=$(date +%s%N)
    child_ticks
    CPU_AT[wrk]=$CHILD_TICKS
    return
  fi
  local wrk wall used ticks nginx=- pg=- busy instances=()
  CPU_FIRST_TICKS= CPU_PG_TICKS= CPU_WRK_TICKS= CPU_INSTANCES_TICKS=0
  child_ticks
  wrk=$((CHILD_TICKS - CPU_AT[wrk]))
  CPU_WRK_TICKS=$wrk
  wall=$(awk "BEGIN{print ($(date +%s%N) - $CPU_STARTED) / 1e9}")
  used=$wrk
  for pid in "${EXTRA_PIDS[@]}"; do
    ticks=$(($(tree_ticks "$pid") - CPU_AT[$pid]))
    used=$((used + ticks))
    if [ "$pid" = "${PROXY_PID:-}" ]; then
      nginx=$(secs "$ticks")
    else
      instances+=("$(secs "$ticks")")
      CPU_FIRST_TICKS=${CPU_FIRST_TICKS:-$ticks}
      CPU_INSTANCES_TICKS=$((CPU_INSTANCES_TICKS + ticks))
    fi
  done
  if [ -n "$PG_MEASURED" ]; then
    pg=$(($(pg_ticks) - CPU_AT[pg]))
    CPU_PG_TICKS=$pg
    used=$((used + pg))
    pg=$(secs "$pg")
  fi
  busy=$(($(busy_ticks) - CPU_AT[busy]))
  CPU_ROW="${instances[0]} | ${instances[1]:--} | $pg | $nginx | $(secs "$wrk") |"
  CPU_ROW+=" $(secs $((busy - used))) | $(secs "$busy") | $(awk "BEGIN{printf \"%.1f\", $wall * $(nproc)}") |"
}

secs() { awk "BEGIN{printf \"%.1f\", $1 / $CLK_TCK}"; }
