# The postgres section of bench/run.sh (`bench/run.sh postgres`): (only when
# named; run it through scripts/with-postgres.sh, which sets
# PLANTSTORE_TEST_DATABASE) POST /plants, then GET /plants?limit=100, at
# $PG_CONNS connections (default 64): in memory, --data --sync always, and
# the postgres build with --database, one instance (with the change log,
# and without it: PLANTSTORE_BENCH_NO_CHANGE_LOG=1, what the change feed
# costs) and two behind nginx (contrib/nginx-plantstore.conf); each
# instance on its own CPU where there are 4 or more; $ROUNDS rounds, each
# with pgbench running plantstore's own single-row INSERT at the same
# connections on the same cluster, and a one-connection POST run of the
# PostgreSQL instance. PG_OLD=PATH (an earlier postgres build, e.g.
# `FEATURES=postgres bench/build-old.sh REV`) adds its one instance to
# each round, before the new one. CPU seconds of each process over the
# POST runs, and per POST for each setup (plantstore, PostgreSQL, wrk),
# PostgreSQL's commit time on one connection ($COMMITS autocommit INSERTs,
# default 1000), and how long /healthz takes to turn 503 and back when
# PostgreSQL is stopped and started, and frozen (SIGSTOP) and thawed.
# $PG_ARGS: more flags for the --database instances (e.g. "--database-pool 16").
# The figures the budgets section judges: PG_RATIO, PG_ONE_CPU_US,
# PG_ONE_PG_US and HEALTH_MAX. Sourced by bench/run.sh after bench/lib/*.sh,
# whose helpers it calls.
# shellcheck shell=bash

# pg_setup ROUND NAME [KEY]: POST then GET through what was started
# (ADDR); adds their rows to the tables and stops it all. With KEY, the
# POST run's requests/s, requests and CPU ticks (every instance,
# PostgreSQL, wrk) are added to SUM[KEY.*]; with C1=1 also a one-
# connection POST run (the latency a lone client sees), KEY.c1.*.
pg_setup() {
  local round=$1 name=$2 key=${3:-}
  MEASURE=pg_cpu post "$PG_CONNS"
  PG_ROWS+=("| $round | $name | POST /plants | $RPS | $P50 | $P99 | $ERRORS |")
  PG_CPU_ROWS+=("| $round | $name | $CPU_ROW")
  if [ -n "$key" ]; then
    add "$key.rps" "$RPS"
    add "$key.requests" "$REQUESTS"
    add "$key.cpu" "$CPU_INSTANCES_TICKS"
    add "$key.pgcpu" "$CPU_PG_TICKS"
    add "$key.wrkcpu" "$CPU_WRK_TICKS"
  fi
  if [ -n "$key" ] && [ -n "${C1:-}" ]; then
    post 1
    PG_ROWS+=("| $round | $name | POST /plants, 1 connection | $RPS | $P50 | $P99 | $ERRORS |")
    add "$key.c1.p50" "$P50"
    add "$key.c1.p99" "$P99"
  fi
  GET_PATH="/plants?limit=100" post "$PG_CONNS" bench/get.lua
  PG_ROWS+=("| $round | $name | GET /plants?limit=100 | $RPS | $P50 | $P99 | $ERRORS |")
  stop_extra
}

# per_request KEY [SETUP]: SUM[SETUP.KEY] (clock ticks over the POST runs
# of SETUP, default pg.one: the PostgreSQL, 1 instance runs) in µs per
# request of those runs.
per_request() {
  local setup=${2:-pg.one}
  awk "BEGIN{printf \"%.1f\", ${SUM[$setup.$1]:-0} / $CLK_TCK * 1e6 / ${SUM[$setup.requests]}}"
}

# split_row SETUP NAME: a row of the CPU split per POST: requests/s (mean
# of rounds), x pgbench, µs of CPU per request of plantstore (every
# instance), PostgreSQL and wrk, and the one-connection p50 and p99 (ms)
# where measured.
split_row() {
  local setup=$1 name=$2 c1='- | -'
  [ -z "${SUM[$setup.c1.p50]:-}" ] || c1="$(mean "$setup.c1.p50") | $(mean "$setup.c1.p99")"
  echo "| $name | $(mean "$setup.rps" 0) | $(ratio "${SUM[$setup.rps]}" "${SUM[pgbench.tps]}") |" \
    "$(per_request cpu "$setup") | $(per_request pgcpu "$setup") | $(per_request wrkcpu "$setup") | $c1 |"
}

# dur_secs: $DURATION (10s, 2m) in seconds, for pgbench -T.
dur_secs() {
  case $DURATION in
    *m) echo $((${DURATION%m} * 60)) ;;
    *s) echo "${DURATION%s}" ;;
    *) echo "$DURATION" ;;
  esac
}

# pgbench_run ROUND: pgbench running plantstore's own single-row INSERT at
# $PG_CONNS connections on a fresh database with plantstore's schema
# (made by a plantstore started and stopped on it), after a 2 s warm-up;
# adds the row to PGBENCH_ROWS and its transactions/s to SUM[pgbench.tps].
pgbench_run() {
  local round=$1 out tps count before pg
  pg_db
  start_instance "" --database "$PG_URL"
  stop_extra
  printf '%s\n' '\set id random(1, 4000000000000000000)' \
    "INSERT INTO plants (id, name, tag, name_folded, tag_folded) VALUES (:id, 'plant', 'bench', 'plant', 'bench') ON CONFLICT (id) DO NOTHING;" \
    >"$WORK/insert.sql"
  local bench=(pgbench -n -M prepared -c "$PG_CONNS" -j 2 -f "$WORK/insert.sql")
  "${bench[@]}" -T 2 "$PG_URL" >/dev/null 2>&1
  before=$(pg_ticks)
  out=$("${bench[@]}" -T "$(dur_secs)" "$PG_URL" 2>&1)
  pg=$(($(pg_ticks) - before))
  tps=$(awk '/^tps = /{printf "%.0f", $3}' <<<"$out")
  count=$(awk -F': ' '/actually processed/{print $2}' <<<"$out")
  [ -n "$tps" ] && [ -n "$count" ] || { echo "pgbench failed: $out" >&2; exit 1; }
  add pgbench.tps "$tps"
  PGBENCH_ROWS+=("| $round | $tps | $(awk "BEGIN{printf \"%.1f\", $pg / $CLK_TCK * 1e6 / $count}") |")
}

# health_ms STATUS SINCE: polls the instance's /healthz (at ADDR) every
# 10 ms until it answers STATUS, for at most 10 s; prints the ms since
# SINCE (date +%s%N), or 10001 if it did not.
health_ms() {
  local status=$1 since=$2 got
  for _ in $(seq 1 1000); do
    got=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://$ADDR/healthz" || true)
    if [ "$got" = "$status" ]; then
      echo $((($(date +%s%N) - since) / 1000000))
      return
    fi
    sleep 0.01
  done
  echo 10001
}

# health_flips: how long /healthz takes to say 503 once PostgreSQL is gone
# and 200 once it is back: stopped (pg_ctl stop -m fast) and started
# again, and frozen (SIGSTOP to the postmaster and every child, as a hung
# host looks) and thawed. Needs the stop and start commands of
# scripts/with-postgres.sh. Sets HEALTH_MAX (ms).
health_flips() {
  if [ -z "${PLANTSTORE_TEST_PG_STOP:-}" ] || [ -z "${PLANTSTORE_TEST_PG_START:-}" ]; then
    echo "Health flips not measured: run through scripts/with-postgres.sh."
    echo
    return
  fi
  local since down up pids rows=()
  pg_db
  start_instance "" --database "$PG_URL"
  sleep 1
  since=$(date +%s%N)
  sh -c "$PLANTSTORE_TEST_PG_STOP"
  down=$(health_ms 503 "$since")
  sleep 1
  sh -c "$PLANTSTORE_TEST_PG_START"
  up=$(health_ms 200 "$(date +%s%N)")
  rows+=("| stopped (pg_ctl stop -m fast; from the stop command), started again (from pg_ctl start's return) | $down | $up |")
  HEALTH_MAX=$(printf '%s\n' "$down" "$up" | sort -n | tail -1)
  PG_POSTMASTER=$(head -n 1 "$(pg_setting data_directory)/postmaster.pid")
  sleep 1
  pids="$(pgrep -P "$PG_POSTMASTER" | tr '\n' ' ')$PG_POSTMASTER"
  since=$(date +%s%N)
  # shellcheck disable=SC2086 # one pid a word
  kill -STOP $pids
  down=$(health_ms 503 "$since")
  sleep 1
  since=$(date +%s%N)
  # shellcheck disable=SC2086
  kill -CONT $pids
  up=$(health_ms 200 "$since")
  rows+=("| frozen (SIGSTOP to every PostgreSQL process), thawed | $down | $up |")
  HEALTH_MAX=$(printf '%s\n' "$HEALTH_MAX" "$down" "$up" | sort -n | tail -1)
  stop_extra
  echo "/healthz of one instance while PostgreSQL goes away and comes back (polled every 10 ms):"
  echo
  echo "| PostgreSQL | ms until 503 | ms until 200 again (10001: not within 10 s) |"
  echo "|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
}

# commit_ms: per autocommit INSERT into commit_probe on one connection,
# $COMMITS of them through one psql, in ms (psql's own start-up included).
commit_ms() {
  local started
  started=$(date +%s%N)
  seq "$COMMITS" | sed 's/.*/INSERT INTO commit_probe VALUES (&);/' |
    psql -q -X -v ON_ERROR_STOP=1 -d "$PG_URL" >/dev/null
  awk "BEGIN{printf \"%.3f\", ($(date +%s%N) - $started) / 1e6 / $COMMITS}"
}

# pg_side ROUND: the change feed's cost with the log on and off at the
# same time, so that a change in the host's speed reaches both alike
# (runs one after the other each see their own): one instance with the
# log (database plantstore_bench) and one without
# (PLANTSTORE_BENCH_NO_CHANGE_LOG=1, database plantstore_bench_off), in
# the same cluster, each loaded by its own wrk -t1 -c64, 2 s and then
# $DURATION measured. Nothing pinned. CPU per stored plant of each side:
# its plantstore, its database's backends (with the log: the writers'
# connections and the follower's apart) and wrk (both wrks over both
# sides' requests). Adds the round's row to PG_SIDE_ROWS and its figures
# to VALUES.
# side_ticks: pg_side's five CPU figures so far (clock ticks), a line
# each: plantstore with the log, its writers' backends, its follower's;
# plantstore without, its backends (pg_side's on_pid, on, feed, off_pid
# and off).
# shellcheck disable=SC2086 # one pid a word
side_ticks() { ticks_of "$on_pid"; ticks_of $on; ticks_of $feed; ticks_of "$off_pid"; ticks_of $off; }

pg_side() {
  local round=$1 on_pid on_addr off_pid off_addr on off feed wrk on_req off_req i
  pg_db plantstore_bench
  start_instance "" --database "$PG_URL" ${args[@]+"${args[@]}"}
  on_pid=${EXTRA_PIDS[-1]} on_addr=$ADDR
  pg_db plantstore_bench_off
  PLANTSTORE_BENCH_NO_CHANGE_LOG=1 start_instance "" --database "$PG_URL" ${args[@]+"${args[@]}"}
  off_pid=${EXTRA_PIDS[-1]} off_addr=$ADDR
  side_pair "$on_addr" "$off_addr" 2s
  feed=$(db_backends plantstore_bench plantstore-feed)
  on=$(db_backends plantstore_bench | grep -vx "${feed:-none}")
  off=$(db_backends plantstore_bench_off)
  local -a at used
  mapfile -t at < <(side_ticks)
  child_ticks
  wrk=$CHILD_TICKS
  side_pair "$on_addr" "$off_addr" "$DURATION"
  child_ticks
  wrk=$((CHILD_TICKS - wrk))
  mapfile -t used < <(side_ticks)
  stop_extra
  read -r _ _ _ _ _ on_req _ <"$WORK/side.1"
  read -r _ _ _ _ _ off_req _ <"$WORK/side.2"
  for i in "${!used[@]}"; do
    used[i]=$(side_us $((used[i] - at[i])) "$WORK/side.$((i < 3 ? 1 : 2))")
  done
  local us_wrk on_total off_total off_on
  us_wrk=$(two "$wrk * 1e6 / $CLK_TCK / ($on_req + $off_req + 1)")
  on_total=$(two "${used[0]} + ${used[1]} + ${used[2]} + $us_wrk")
  off_total=$(two "${used[3]} + ${used[4]} + $us_wrk")
  off_on=$(ratio "$off_total" "$on_total")
  keep side.cost "$(two "$on_total - $off_total")"
  keep side.writers "$(two "${used[1]} - ${used[4]}")"
  keep side.follower "${used[2]}"
  keep side.ratio "$off_on"
  PG_SIDE_ROWS+=("| $round | $on_req | $off_req | ${used[0]} | ${used[1]} | ${used[2]} | $on_total \
| ${used[3]} | ${used[4]} | $off_total | $us_wrk | $off_on |")
}

# pg_side_report: pg_side's rows, and the medians of its rounds.
pg_side_report() {
  echo "The change feed's cost, on and off side by side (\`pg_side\`: one instance with the"
  echo "log and one without, each on a database of its own in the same cluster and loaded by"
  echo "its own wrk -t1 -c64 at the same time; nothing pinned). CPU µs per stored plant."
  echo "\"PostgreSQL\": the side's database backends; with the log, the writers' connections and"
  echo "the follower's (which numbers and reads the log) apart. \"off / on\": the POST/s the"
  echo "feed leaves where the host's CPUs are the limit (every process of a side, wrk included)."
  echo
  echo "| round | POSTs, log on | POSTs, log off | on: plantstore | on: PostgreSQL writers | on: PostgreSQL follower | on: all | off: plantstore | off: PostgreSQL | off: all | wrk | off / on |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${PG_SIDE_ROWS[@]}"
  echo
  echo "Medians of rounds: the feed costs $(median side.cost 2) µs of CPU per plant"
  echo "($(range side.cost)): PostgreSQL's writers $(median side.writers 2) µs more with the log, its"
  echo "follower $(median side.follower 2) µs; off / on $(median side.ratio 3) ($(range side.ratio))."
  echo
}

section_postgres() {
  need_nginx
  CLK_TCK=$(getconf CLK_TCK)
  PG_CONNS=${PG_CONNS:-64}
  COMMITS=${COMMITS:-1000}
  local args cpu_a='' cpu_b='' pinning
  read -ra args <<<"${PG_ARGS:-}"
  pg_db
  PG_POSTMASTER=$(head -n 1 "$(pg_setting data_directory)/postmaster.pid")
  if [ "$(nproc)" -ge 4 ]; then
    cpu_a=0 cpu_b=1
    pinning="Each instance on a CPU of its own (taskset: one instance on CPU 0, two on
CPUs 0 and 1); wrk, nginx and PostgreSQL are not pinned."
  else
    pinning="Nothing pinned: $(nproc) CPUs here, and pinning takes 4 (one for each
instance, the rest for wrk, nginx and PostgreSQL), so every process shares every CPU."
  fi
  echo "## POST /plants, then GET /plants?limit=100: in memory, --data, PostgreSQL (wrk -t2 -c$PG_CONNS, $DURATION, $ROUNDS rounds)"
  echo
  echo "PostgreSQL $(pg_setting server_version) (\`PLANTSTORE_TEST_DATABASE\`; fsync $(pg_setting fsync),"
  echo "synchronous_commit $(pg_setting synchronous_commit), wal_sync_method $(pg_setting wal_sync_method));"
  echo "each setup starts on an empty store or database, and its GET run reads"
  echo "what its POST run stored. The postgres build runs with \`--database\` and"
  if [ ${#args[@]} -gt 0 ]; then echo "\`${args[*]}\`;"; else echo "its default pool;"; fi
  echo "two instances share one database behind nginx (contrib/nginx-plantstore.conf)."
  echo "$pinning"
  echo
  PG_ROWS=() PG_CPU_ROWS=() PGBENCH_ROWS=() PG_SIDE_ROWS=()
  local round a
  for round in $(seq 1 "$ROUNDS"); do
    PG_MEASURED=
    start_instance "$cpu_a"
    pg_setup "$round" "in memory, 1 instance"
    rm -f "$WORK/pg.journal"
    start_instance "$cpu_a" --data "$WORK/pg.journal" --sync always
    pg_setup "$round" "--data --sync always, 1 instance"
    PG_MEASURED=1
    if [ -n "${PG_OLD:-}" ]; then
      pg_db
      PG_BIN=$PG_OLD start_instance "$cpu_a" --database "$PG_URL" ${args[@]+"${args[@]}"}
      C1=1 pg_setup "$round" "PostgreSQL, 1 instance, old build" pg.old
    fi
    pg_db
    start_instance "$cpu_a" --database "$PG_URL" ${args[@]+"${args[@]}"}
    C1=1 pg_setup "$round" "PostgreSQL, 1 instance" pg.one
    pg_db
    PLANTSTORE_BENCH_NO_CHANGE_LOG=1 start_instance "$cpu_a" --database "$PG_URL" ${args[@]+"${args[@]}"}
    pg_setup "$round" "PostgreSQL, 1 instance, no change log" pg.nolog
    pgbench_run "$round"
    pg_db
    start_instance "$cpu_a" --database "$PG_URL" ${args[@]+"${args[@]}"}
    a=$ADDR
    start_instance "$cpu_b" --database "$PG_URL" ${args[@]+"${args[@]}"}
    start_proxy "$a" "$ADDR"
    pg_setup "$round" "PostgreSQL, 2 instances behind nginx" pg.two
    pg_side "$round"
  done
  echo "| round | setup | request | requests/s | p50 ms | p99 ms | errors |"
  echo "|---|---|---|---|---|---|---|"
  printf '%s\n' "${PG_ROWS[@]}"
  echo
  echo "CPU seconds over each measured POST run. PostgreSQL: all its processes;"
  echo "else: every CPU's busy time less the processes listed (the kernel's own"
  echo "threads and interrupts, and anything else running on the machine)."
  echo
  echo "| round | setup | instance 1 | instance 2 | PostgreSQL | nginx | wrk | else | all CPUs busy | CPUs × wall |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${PG_CPU_ROWS[@]}"
  echo
  PG_ONE_CPU_US=$(per_request cpu) PG_ONE_PG_US=$(per_request pgcpu)
  PG_RATIO=$(ratio "${SUM[pg.one.rps]}" "${SUM[pgbench.tps]}")
  PG_C1_P50=$(mean pg.one.c1.p50) PG_C1_P99=$(mean pg.one.c1.p99)
  echo "pgbench on the same cluster, in the same rounds: plantstore's own single-row"
  echo "INSERT (\`pgbench -n -M prepared -c $PG_CONNS -j 2\`, ids at random, \`ON CONFLICT (id)"
  echo 'DO NOTHING`), into a fresh database with the schema plantstore makes.'
  echo
  echo "| round | pgbench transactions/s | PostgreSQL CPU per INSERT, µs |"
  echo "|---|---|---|"
  printf '%s\n' "${PGBENCH_ROWS[@]}"
  echo
  echo "PostgreSQL, 1 instance, mean of rounds: $(mean pg.one.rps 0) POST/s, $PG_RATIO x pgbench;"
  echo "CPU per request: plantstore $PG_ONE_CPU_US µs, PostgreSQL $PG_ONE_PG_US µs (a stored plant),"
  echo "wrk $(per_request wrkcpu) µs; one connection: p50 $PG_C1_P50 ms, p99 $PG_C1_P99 ms."
  echo
  echo "Where the time of a POST goes, means of rounds: CPU per request of every plantstore"
  echo "instance, PostgreSQL (all its processes) and wrk, which share the machine's CPUs."
  echo "\"no change log\": the same build with PLANTSTORE_BENCH_NO_CHANGE_LOG=1 (the batches"
  echo "log nothing and no instance follows or numbers the log: the change feed's whole cost"
  echo "is the difference).${PG_OLD:+ \"old build\": PG_OLD ($PG_OLD).}"
  echo
  echo "| setup | POST/s | x pgbench | plantstore µs | PostgreSQL µs | wrk µs | c1 p50 ms | c1 p99 ms |"
  echo "|---|---|---|---|---|---|---|---|"
  split_row pg.one "PostgreSQL, 1 instance"
  split_row pg.nolog "PostgreSQL, 1 instance, no change log"
  [ -z "${PG_OLD:-}" ] || split_row pg.old "PostgreSQL, 1 instance, old build"
  split_row pg.two "PostgreSQL, 2 instances behind nginx"
  echo
  echo "Change feed on / off, one after the other: $(ratio "${SUM[pg.one.rps]}" "${SUM[pg.nolog.rps]}") x the POST/s.${PG_OLD:+ New / old: $(ratio "${SUM[pg.one.rps]}" "${SUM[pg.old.rps]}") x the POST/s, one-connection p50 $(ratio "${SUM[pg.one.c1.p50]}" "${SUM[pg.old.c1.p50]}") x.}"
  echo
  pg_side_report
  health_flips
  local on off
  pg_db
  psql -q -X -d "$PG_URL" -c "CREATE TABLE commit_probe (n integer)"
  on=$(commit_ms)
  off=$(PGOPTIONS="-c synchronous_commit=off" commit_ms)
  echo "PostgreSQL commit on one connection ($COMMITS autocommit INSERTs through one psql):"
  echo "$on ms each; $off ms with synchronous_commit off (no wait for the WAL flush)."
  echo
  psql -q -X -d "$PLANTSTORE_TEST_DATABASE" -c "DROP DATABASE plantstore_bench WITH (FORCE)" \
    -c "DROP DATABASE IF EXISTS plantstore_bench_off WITH (FORCE)"
}
