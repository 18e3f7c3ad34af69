#!/usr/bin/env bash
# The soak: the release binary on one journal file (--data), killed with
# SIGKILL at a random moment of every cycle while writers send creates,
# replaces and deletes, and restarted on the same file. Each start must
# recover the journal, and find every acknowledged change: a plant as its
# last 2xx left it, absent after an acknowledged delete; a change in flight
# at the kill may be there or not. A --compact-min of 4 KiB keeps
# compaction running, so some kills land inside one.
#
#   scripts/stress/soak.sh [CYCLES]      (default 50: about 40 s on two cores)
#
# SOAK_SECONDS stops starting cycles after that many seconds (the last
# start still checks); SOAK_SEED replays the writers' choices (not the
# timing). Prints one line per cycle and a summary; exits 1 on any lost or
# wrong plant, a start that failed or a writer that got an answer no kill
# explains. The work folder (journal, acknowledgement log, server logs)
# is removed on success and kept, and named, on failure. The writers are
# scripts/stress/soak.py; the same loop in Rust is tests/integration/storage/crash.rs.
set -euo pipefail
cd "$(dirname "$0")/../.."

cycles=${1:-50}
seconds=${SOAK_SECONDS:-0}
seed=${SOAK_SEED:-$RANDOM$RANDOM}
token=soak-token
# The kill lands this many milliseconds after the writers are under way.
kill_min=20
kill_max=400

[[ $cycles =~ ^[0-9]+$ && $cycles -gt 0 ]] || {
    echo "usage: scripts/stress/soak.sh [CYCLES]" >&2
    exit 2
}
[[ $seconds =~ ^[0-9]+$ ]] || { echo "SOAK_SECONDS: not a number: $seconds" >&2; exit 2; }

# SERVE_BIN: a default build made already, run instead of building one.
[ -n "${SERVE_BIN:-}" ] || cargo build --release --quiet
bin=${SERVE_BIN:-${CARGO_TARGET_DIR:-target}/release/plantstore}

# A PLANTSTORE_* variable of this shell would be a flag to the server.
while read -r name; do unset "$name"; done < <(compgen -e | grep '^PLANTSTORE_' || true)

work=$(mktemp -d "${TMPDIR:-/tmp}/plantstore-soak.XXXXXX")
journal=$work/plants.journal
state=$work/state.json
acks=$work/acks.log
server_pid=
writer_pid=
ok=

stop() {
    local pid
    for pid in $writer_pid $server_pid; do
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    writer_pid= server_pid=
}
finish() {
    stop
    if [ -n "$ok" ]; then
        rm -rf "$work"
    else
        echo "soak: kept $work (journal, state.json, acks.log, server logs); SOAK_SEED=$seed" >&2
    fi
}
trap finish EXIT
trap 'exit 130' INT TERM

fail() {
    echo "soak: FAILED in cycle $cycle: $*" >&2
    exit 1
}

# Starts the server on $journal and sets $addr, or fails naming the log.
start() {
    local log=$work/server-$cycle.log
    : >"$log" # before the server's shell opens it, for the first grep
    PLANTSTORE_TOKEN=$token "$bin" --addr 127.0.0.1:0 --data "$journal" \
        --compact-min 4096 2>"$log" &
    server_pid=$!
    addr=
    for _ in $(seq 500); do
        addr=$(grep -o -m1 'listening on http://[^,]*' "$log" | sed 's|listening on http://||' || true)
        [ -n "$addr" ] && return 0
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.02
    done
    tail -n 20 "$log" >&2
    fail "the server did not start on the journal (log: $log)"
}

# Checks the recovered plants against the model; adds to the figures.
check() {
    local out
    out=$(python3 scripts/stress/soak.py check "$state" "$addr" "$token") || {
        echo "$out" >&2
        fail "acknowledged changes lost or wrong"
    }
    echo "cycle $cycle: $out"
    checked=$((checked + $(echo "$out" | sed -n 's/^checked \([0-9]*\) ids.*/\1/p')))
    in_flight=$((in_flight + $(echo "$out" | sed -n 's/.*(\([0-9]*\) in flight.*/\1/p')))
}

started=$SECONDS
checked=0 in_flight=0 compactions=0 compacted_cycles=0 interrupted=0
echo "soak: $cycles cycles on $journal, SOAK_SEED=$seed"
cycle=0
while :; do
    start
    check
    # "removed FILE.compact left by an interrupted compaction"
    if grep -q 'left by an interrupted compaction' "$work/server-$cycle.log"; then
        interrupted=$((interrupted + 1))
    fi
    if [ "$cycle" -ge "$cycles" ] || { [ "$seconds" -gt 0 ] && [ $((SECONDS - started)) -ge "$seconds" ]; }; then
        break
    fi
    cycle=$((cycle + 1))

    ready=$work/ready
    rm -f "$ready"
    python3 scripts/stress/soak.py write "$state" "$addr" "$token" "$cycle" "$((seed + cycle))" \
        "$acks" "$ready" &
    writer_pid=$!
    for _ in $(seq 500); do
        [ -e "$ready" ] && break
        kill -0 "$writer_pid" 2>/dev/null || break
        sleep 0.01
    done
    [ -e "$ready" ] || fail "the writers did not get under way"
    delay=$((kill_min + RANDOM % (kill_max - kill_min)))
    sleep "$(printf '0.%03d' "$delay")"
    kill -9 "$server_pid" 2>/dev/null || fail "the server died before the kill"
    wait "$server_pid" 2>/dev/null || true
    server_pid=
    wait "$writer_pid" || fail "a writer got an answer that no kill explains"
    writer_pid=
    n=$(grep -c 'journal compacted' "$work/server-$((cycle - 1)).log" || true)
    compactions=$((compactions + n))
    [ "$n" -gt 0 ] && compacted_cycles=$((compacted_cycles + 1))
done
stop

acked=$(wc -l <"$acks")
echo "soak: $cycle cycles in $((SECONDS - started)) s, $acked acknowledged changes checked" \
    "($checked id checks, $in_flight in flight at a kill), lost = 0;" \
    "$compactions compactions in $compacted_cycles cycles, $interrupted starts" \
    "after a kill inside one"
# Frequent compaction is the point of --compact-min 4096: a soak without
# any did not test what it says it tests.
[ "$cycle" -lt 10 ] || [ "$compactions" -gt 0 ] || fail "no compaction ran in $cycle cycles"
ok=1
