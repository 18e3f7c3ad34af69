#!/usr/bin/env bash
# Builds release binaries the way they are published: the standard library
# rebuilt for the target (-Z build-std) with unwinding but without the
# backtrace symboliser (about 100 KiB of DWARF parsing, gzip and demangling
# that only serves RUST_BACKTRACE). Panics are still caught per request and
# logged with their message and location. Prints each target, its
# stripped size and the binary's path. For a glibc target the linker's map
# is written beside the binary (plantstore.map), for bench/run.sh footprint.
#
#   scripts/release/release-build.sh TARGET...    e.g. x86_64-unknown-linux-gnu
#   FEATURES=postgres scripts/release/release-build.sh TARGET...
#   FEATURES=plain scripts/release/release-build.sh TARGET...
#
# The default build serves HTTPS (the `tls` feature). FEATURES=plain makes
# the plain build (--no-default-features: HTTP only, the smallest; published
# as plantstore-plain) in target/plain.
#
# FEATURES (cargo features, comma-separated) builds in a target directory of
# its own, target/FEATURES (commas as dashes), so the default build beside
# it is neither replaced nor rebuilt: with FEATURES=postgres the binary is
# target/postgres/TARGET/release/plantstore (published as
# plantstore-postgres).
#
# rustup cannot add targets or rust-src here, so this uses Debian's Rust
# (rustc-web, with its rust-web-src) with RUSTC_BOOTSTRAP for -Z flags,
# Debian's cross gcc for glibc ARM targets and zig for musl ones. Installs
# what it needs (apt as root or via sudo, zig into .venv-zig). Output:
# target/TARGET/release/plantstore, without FEATURES.
#
# RELEASE_DIR=DIR puts the default build in DIR instead of target (DIR/TARGET/
# release/plantstore), with its own host folder: cargo lets one build at a
# time use a target directory, so CI builds the published binaries there
# while its other steps build and run in target. scripts/release/cross-smoke.sh,
# scripts/release/package-deb.sh and scripts/release/container.sh read the same variable.
set -euo pipefail
cd "$(dirname "$0")/../.."

TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || { echo "usage: scripts/release/release-build.sh TARGET..." >&2; exit 2; }

SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
need=()
[ -x /usr/bin/cargo ] && [ -d /usr/lib/rustlib/src/rust/library ] || need+=(rustc-web cargo-web rust-web-src)
for target in "${TARGETS[@]}"; do
  case $target in
    aarch64-unknown-linux-gnu)
      command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross) ;;
    arm*-unknown-linux-gnueabihf)
      command -v arm-linux-gnueabihf-gcc >/dev/null || need+=(gcc-arm-linux-gnueabihf libc6-dev-armhf-cross) ;;
  esac
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >&2
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi
if [[ " ${TARGETS[*]} " == *musl* ]] && [ ! -x .venv-zig/bin/cargo-zigbuild ]; then
  echo "installing zig and cargo-zigbuild into .venv-zig" >&2
  python3 -m venv .venv-zig
  .venv-zig/bin/pip install -q ziglang cargo-zigbuild >&2
fi
[ -z "${INSTALL_ONLY:-}" ] || exit 0  # scripts/ci/ci-prepare.sh: install only
export PATH=$PWD/.venv-zig/bin:$PATH

D=(env RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 /usr/bin/cargo)
BS=(-Z build-std=std,panic_abort -Z build-std-features=panic-unwind)
FEATURES=${FEATURES:-}
dir=${RELEASE_DIR:-target}
WITH=()
[ "$dir" = target ] || WITH=(--target-dir "$dir")
if [ "$FEATURES" = plain ]; then
  dir=target/plain
  WITH=(--no-default-features --target-dir "$dir")
elif [ -n "$FEATURES" ]; then
  dir=target/${FEATURES//,/-}
  WITH=(--features "$FEATURES" --target-dir "$dir")
fi

# Panic messages name source files from their crate's root
# (serde_json-1.0.154/src/de.rs, std/src/...), not from where this machine
# keeps them: the published binary says nothing of the machine that built
# it, and is 4 KB smaller. The crates are fetched first, so that the
# registry's folders exist to be named; rustc applies the last prefix that
# matches, so the folder above them, named first, only catches a crate from
# a registry folder that appeared since.
"${D[@]}" fetch --quiet >&2
registry=${CARGO_HOME:-$HOME/.cargo}/registry/src
remap="\"--remap-path-prefix=$registry/=\""
for source in "$registry"/*/ /usr/lib/rustlib/src/rust/library/; do
  if [ -d "$source" ]; then remap+=",\"--remap-path-prefix=$source=\""; fi
done

for target in "${TARGETS[@]}"; do
  echo "== $target: release build" >&2
  # Joined with the config file's flags for the target, which RUSTFLAGS
  # would replace.
  FLAGS=(--config "target.$target.rustflags=[$remap]")
  bin=$dir/$target/release/plantstore
  case $target in
    *musl*) "${D[@]}" zigbuild --quiet --release --bin plantstore --target "$target" "${BS[@]}" "${FLAGS[@]}" ${WITH[@]+"${WITH[@]}"} ;;
    # GNU ld's linker map beside the binary (plantstore.map: every input
    # section kept, with its bytes and its symbol), which bench/run.sh
    # footprint reads to say what the build is made of, the binary being
    # stripped. `cargo rustc` hands the flag to the binary's own compile
    # alone: no dependency is rebuilt for it, and the binary is the same.
    *) "${D[@]}" rustc --quiet --release --bin plantstore --target "$target" "${BS[@]}" "${FLAGS[@]}" \
      ${WITH[@]+"${WITH[@]}"} -- -C "link-arg=-Wl,-Map=$(realpath -m "$bin.map")" ;;
  esac
  echo "$target $(stat -c %s "$bin") $bin"
done
