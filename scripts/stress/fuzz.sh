#!/usr/bin/env bash
# Runs every fuzz target (or the ones named) for SECONDS each, starting from
# the committed corpus in fuzz/corpus/TARGET and the inputs of past crashes
# in fuzz/regressions/TARGET. New inputs go to
# fuzz/target/corpus/TARGET, crashes to fuzz/artifacts/TARGET; any crash,
# hang (over 5 s for one input) or failed invariant makes this exit non-zero.
#
#   scripts/stress/fuzz.sh SECONDS [TARGET...]     targets: engine validation journal tls
#   scripts/stress/fuzz.sh build [TARGET...]       build them only (CI, ahead of the run)
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
for target in "${targets[@]}"; do
    mkdir -p "target/corpus/$target" "corpus/$target" "regressions/$target"
    echo "== fuzz $target for ${seconds}s"
    log="target/fuzz-$target.log"
    status=0
    cargo +nightly fuzz run "$target" "target/corpus/$target" "corpus/$target" \
        "regressions/$target" -- \
        -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 \
        -print_final_stats=1 >"$log" 2>&1 || status=$?
    grep -E '^(#[0-9]+[[:space:]]+DONE|stat::number_of_executed_units|Done )|panicked|ERROR|SUMMARY' "$log" || true
    if [ "$status" -ne 0 ]; then
        tail -n 40 "$log" >&2
        echo "fuzz.sh: $target failed (exit $status); see fuzz/artifacts/$target" >&2
        exit "$status"
    fi
done
