#!/usr/bin/env bash
# Runs every fuzz target (or the ones named) for SECONDS each, starting from
# the committed corpus in fuzz/corpus/TARGET and the inputs of past crashes
# in fuzz/regressions/TARGET. New inputs go to
# fuzz/target/corpus/TARGET, crashes to fuzz/artifacts/TARGET; any crash,
# hang (over 5 s for one input) or failed invariant makes this exit non-zero.
#
#   scripts/stress/fuzz.sh SECONDS [TARGET...]     targets: engine validation journal tls
#   scripts/stress/fuzz.sh build [TARGET...]       build them only (CI, ahead of the run)
#   FUZZ_JOBS=2 scripts/stress/fuzz.sh 30           two targets at a time (CI)
#
# Needs the nightly toolchain; installs cargo-fuzz if it is missing.
set -euo pipefail
cd "$(dirname "$0")/../../fuzz"

seconds=${1:?usage: scripts/stress/fuzz.sh SECONDS [TARGET...]}
shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(engine validation journal tls)

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz.sh: the nightly toolchain is required (cargo +nightly)" >&2
    exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

for target in "${targets[@]}"; do cargo +nightly fuzz build "$target"; done
[ "$seconds" != build ] || exit 0
# One target's run: its summary lines, and on failure the log's tail.
run_target() {
    local target=$1 log="target/fuzz-$1.log" status=0
    mkdir -p "target/corpus/$target" "corpus/$target" "regressions/$target"
    cargo +nightly fuzz run "$target" "target/corpus/$target" "corpus/$target" \
        "regressions/$target" -- \
        -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 \
        -print_final_stats=1 >"$log" 2>&1 || status=$?
    echo "== fuzz $target for ${seconds}s"
    grep -E '^(#[0-9]+[[:space:]]+DONE|stat::number_of_executed_units|Done )|panicked|ERROR|SUMMARY' "$log" || true
    if [ "$status" -ne 0 ]; then
        tail -n 40 "$log" >&2
        echo "fuzz.sh: $target failed (exit $status); see fuzz/artifacts/$target" >&2
    fi
    return "$status"
}

# FUZZ_JOBS targets at a time (default 1; a fuzzer runs on one core).
jobs=${FUZZ_JOBS:-1}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: FUZZ_JOBS is a count, not '$jobs'" >&2; exit 2; }
# Stopped or failed, no fuzzer is left running.
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
trap 'exit 130' INT TERM
failed=0
running=0
for target in "${targets[@]}"; do
    if [ "$running" -ge "$jobs" ]; then
        wait -n || failed=1
        running=$((running - 1))
    fi
    run_target "$target" &
    running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
    wait -n || failed=1
    running=$((running - 1))
done
exit "$failed"
