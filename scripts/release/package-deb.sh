#!/usr/bin/env bash
# Builds the Debian packages with cargo-deb from the binaries
# scripts/release/release-build.sh makes with FEATURES=acme (the default
# features, HTTPS, and ACME: --acme-domain, a build of its own beside the
# smaller default one; their sizes are on docs/figures.md), in target/acme
# (PACKAGE_FEATURES= packages the default build instead, from RELEASE_DIR
# as below):
#
#   amd64  x86_64-unknown-linux-gnu
#   arm64  aarch64-unknown-linux-gnu       64-bit Raspberry Pi OS, Debian
#   armhf  arm-unknown-linux-musleabihf    ARMv6 + VFP, static: every 32-bit
#          Raspberry Pi OS, Pi Zero and Pi 1 included (its armhf is ARMv6,
#          Debian's is ARMv7, and an ARMv7 build would crash an ARMv6 board);
#          static, because no ARMv6 glibc can be linked here (docs/raspberry-pi.md)
#
#   scripts/release/package-deb.sh [--arch ARCH]... [--version VERSION]
#
#   --arch ARCH        a package to make: amd64, arm64 or armhf; repeatable,
#                      or a list (--arch amd64,arm64); default: all three
#   --version VERSION  the packages' version (default: Cargo.toml's,
#                      revision 1: 1.0.0-1)
#   --help             this text
#
# NO_BUILD=1 packages the binaries already at
# target/acme/TARGET/release/plantstore (the release workflow's, built by
# cross; without PACKAGE_FEATURES, target/TARGET/release/plantstore,
# RELEASE_DIR as for scripts/release/release-build.sh). Prints each
# package's architecture, size and path; the packages are
# target/debian/plantstore_VERSION_ARCH.deb. Writes under target/ only
# (the man page, completions and changelog it packages too): no tracked
# file changes (a package's size goes onto docs/figures.md when
# bench/run.sh footprint is run, on purpose).
# The man page comes from --help (help2man), the bash, zsh and fish
# completions from examples/completions.rs. Installs help2man (apt) and
# cargo-deb (pinned, built once into .tools/cargo-deb, about a minute).
# From a fresh clone the amd64 package took about 6 minutes on two shared
# cores, nearly all of it the release build; with the build made, seconds.
set -euo pipefail
cd "$(dirname "$0")/../.."

usage() { sed -n '/^#   scripts\/release\/package-deb.sh/,/^#   --help/s/^# \{0,1\}//p' "$0"; }
VERSION=
ARCHS=()
while [ $# -gt 0 ]; do
  case $1 in
    --arch) [ $# -ge 2 ] || { usage >&2; exit 2; }; IFS=, read -ra more <<<"$2"; ARCHS+=("${more[@]}"); shift 2 ;;
    --arch=*) IFS=, read -ra more <<<"${1#--arch=}"; ARCHS+=("${more[@]}"); shift ;;
    --version) [ $# -ge 2 ] || { usage >&2; exit 2; }; VERSION=$2; shift 2 ;;
    --version=*) VERSION=${1#--version=}; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "package-deb.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
[ ${#ARCHS[@]} -gt 0 ] || ARCHS=(amd64 arm64 armhf)
CARGO_DEB_VERSION=3.8.0

target_of() {
  case $1 in
    amd64) echo x86_64-unknown-linux-gnu ;;
    arm64) echo aarch64-unknown-linux-gnu ;;
    armhf) echo arm-unknown-linux-musleabihf ;;
    *) echo "unknown architecture $1 (amd64, arm64, armhf)" >&2; exit 2 ;;
  esac
}
targets=()
for arch in "${ARCHS[@]}"; do targets+=("$(target_of "$arch")"); done

if ! command -v help2man >/dev/null || ! command -v dpkg-shlibdeps >/dev/null; then
  scripts/apt-install.sh help2man dpkg-dev >&2
fi
CARGO_DEB=.tools/cargo-deb/bin/cargo-deb
if ! [ -x $CARGO_DEB ] || [ "$($CARGO_DEB --version)" != "cargo-deb $CARGO_DEB_VERSION" ]; then
  echo "building cargo-deb $CARGO_DEB_VERSION into .tools/cargo-deb" >&2
  cargo install --quiet --locked --version "$CARGO_DEB_VERSION" --root .tools/cargo-deb cargo-deb >&2
fi

PACKAGE_FEATURES=${PACKAGE_FEATURES-acme}
if [ -n "$PACKAGE_FEATURES" ]; then
  bins=target/${PACKAGE_FEATURES//,/-}
  features=(--features "$PACKAGE_FEATURES")
else
  bins=${RELEASE_DIR:-target}
  features=()
fi
[ -n "${NO_BUILD:-}" ] || FEATURES=$PACKAGE_FEATURES scripts/release/release-build.sh "${targets[@]}" >/dev/null

# The man page, from the --help of whichever build runs here. help2man
# wants two spaces between a flag and its text, which argh leaves as one
# after a long flag: a wrapper adds the second. The date is the last
# commit's, so the same source makes the same page.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
native=
for target in "${targets[@]}" x86_64-unknown-linux-gnu; do
  bin=$PWD/$bins/$target/release/plantstore
  if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then native=$bin; break; fi
done
[ -n "$native" ] || native=$(FEATURES=$PACKAGE_FEATURES scripts/release/release-build.sh x86_64-unknown-linux-gnu | cut -d' ' -f3)
wrap=$(mktemp -d)
trap 'rm -rf "$wrap"' EXIT
printf '#!/bin/sh\n"%s" "$@" | sed -E "s/^(  --[^ ]+) ([^ ])/\\\\1  \\\\2/"\n' "$native" >"$wrap/plantstore"
chmod +x "$wrap/plantstore"
mkdir -p target/man
PATH=$wrap:$PATH help2man --no-info --include contrib/deb/plantstore.h2m \
  --name "a tiny, fast HTTP server for the Plant Store API" plantstore -o target/man/plantstore.1

# Shell completions, from the flags of the packaged build.
mkdir -p target/completions
for shell in bash zsh fish; do
  cargo run --quiet ${features[@]+"${features[@]}"} --example completions -- "$shell" >"target/completions/plantstore.$shell"
done

# The Debian changelog, one entry for the version being packaged (the
# project's own changes are in its release notes).
base=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
deb_version=${VERSION:-$base-1}
maintainer=$(sed -n 's/^maintainer = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
mkdir -p target/deb
cat >target/deb/changelog <<CHANGES
plantstore ($deb_version) unstable; urgency=medium

  * plantstore $deb_version, built from the release $base.

 -- $maintainer  $(date -u -R -d "@$SOURCE_DATE_EPOCH")
CHANGES

version=(--deb-version "$deb_version")
for arch in "${ARCHS[@]}"; do
  target=$(target_of "$arch")
  # --no-strip: the release profile strips already, and the host's strip
  # does not read ARM binaries.
  variant=()
  [[ $target != *musl* ]] || variant=(--variant static)
  log=target/debian/cargo-deb-$arch.log
  mkdir -p target/debian
  # cargo-deb finds the binary where cargo metadata says the target
  # directory is.
  CARGO_TARGET_DIR=$bins $CARGO_DEB --no-build --no-strip --locked --target "$target" --output target/debian \
    ${version[@]+"${version[@]}"} ${variant[@]+"${variant[@]}"} >"$log" 2>&1 ||
    { cat "$log" >&2; echo "cargo-deb failed for $arch" >&2; exit 1; }
  out=$(tail -n 1 "$log")
  [ -f "$out" ] || { cat "$log" >&2; exit 1; }
  echo "$arch $(stat -c %s "$out") $out"
done
