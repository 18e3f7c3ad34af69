#!/usr/bin/env bash
# Builds plantstore for ARM and drives real requests against each binary
# under qemu-user, over HTTP and then over HTTPS (scripts/release/smoke.sh). Prints
# each binary's stripped size; writes under target/ only (bench/run.sh
# footprint puts the sizes of the builds it finds there onto
# docs/figures.md, when it is run on purpose). Minutes a target to build
# from nothing, seconds to smoke.
#
#   scripts/release/cross-smoke.sh [TARGET...]
#
# Default targets: aarch64-unknown-linux-gnu (64-bit Pi OS),
# armv7-unknown-linux-gnueabihf (Pi 2/3/4, 32-bit) and
# arm-unknown-linux-musleabihf (ARMv6: Pi Zero/1, static, run with
# -cpu arm1176).
#
# No Docker here, and rustup cannot add targets: scripts/release/release-build.sh
# builds each binary with Debian's Rust, rebuilding the standard library for
# the target (-Z build-std), as the release workflow does with `cross`.
set -euo pipefail
cd "$(dirname "$0")/../.."

TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(
  aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf arm-unknown-linux-musleabihf)

# The binaries, built as they are published (installs the toolchains).
scripts/release/release-build.sh "${TARGETS[@]}" >/dev/null

declare -A SIZES
for target in "${TARGETS[@]}"; do
  bin=${RELEASE_DIR:-target}/$target/release/plantstore
  SIZES[$target]=$(stat -c %s "$bin")
  scripts/release/smoke.sh "$target" "$bin"
done

echo "| target | stripped binary bytes | KiB |"
echo "|---|---|---|"
for target in "${TARGETS[@]}"; do
  echo "| $target | ${SIZES[$target]} | $(( SIZES[$target] / 1024 )) |"
done
