#!/usr/bin/env bash
# Builds plantstore as it was at an earlier git revision, the way
# bench/run.sh builds the current one, to run the two side by side:
#
#   bench/build-old.sh REV                   e.g. HEAD~3, a tag, a commit
#   OLD=$(bench/build-old.sh REV) bench/run.sh pinned
#
# (bench/run.sh does this itself when OLD names a revision rather than a
# file: OLD=HEAD~3 bench/run.sh pinned.)
#
# The revision's committed files (git archive) go to target/old-COMMIT/tree
# and are built there with today's scripts/release/release-build.sh (std rebuilt,
# without the backtrace symboliser, as published), so the two binaries
# differ only by their source. COMMIT is the revision's short hash: HEAD~1
# names a fixed directory, and asking again for a revision built before
# reuses its build. Offline: every crate its Cargo.lock names must be in the
# local cargo cache (it is for a revision built here before). A first
# build takes a few minutes on two cores (std and every dependency are
# rebuilt in target/old-COMMIT/tree/target).
#
# Prints the binary's size on stderr and its path on stdout:
# target/old-COMMIT/plantstore. With FEATURES (as release-build.sh takes
# them, e.g. FEATURES=postgres for the postgres section's PG_OLD), that
# build instead: target/old-COMMIT/plantstore-FEATURES.
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -eq 1 ] || { echo "usage: bench/build-old.sh REV" >&2; exit 2; }
commit=$(git rev-parse --verify --quiet "$1^{commit}") ||
  { echo "bench/build-old.sh: $1 is not a revision of this repository" >&2; exit 2; }
short=$(git rev-parse --short "$commit")
dir=target/old-$short
host=$(uname -m)-unknown-linux-gnu

if [ ! -d "$dir/tree" ]; then
  mkdir -p "$dir"
  rm -rf "$dir/tree.partial"
  mkdir "$dir/tree.partial"
  git archive "$commit" | tar -x -C "$dir/tree.partial"
  mv "$dir/tree.partial" "$dir/tree"
fi
# Today's build recipe, not the revision's (it may have none, or another).
mkdir -p "$dir/tree/scripts/release"
cmp -s scripts/release/release-build.sh "$dir/tree/scripts/release/release-build.sh" ||
  cp scripts/release/release-build.sh "$dir/tree/scripts/release/release-build.sh"
echo "building $1 ($short) in $dir/tree" >&2
CARGO_NET_OFFLINE=true "$dir/tree/scripts/release/release-build.sh" "$host" >/dev/null
built=$dir/tree/target/$host/release/plantstore out=$dir/plantstore
if [ -n "${FEATURES:-}" ]; then
  built=$dir/tree/target/${FEATURES//,/-}/$host/release/plantstore out=$dir/plantstore-${FEATURES//,/-}
fi
cp "$built" "$out"
echo "$out: $(stat -c %s "$out") bytes" >&2
echo "$out"
