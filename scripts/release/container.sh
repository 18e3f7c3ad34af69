#!/usr/bin/env bash
# Builds the container image (Containerfile) with podman for linux/amd64,
# linux/arm64 and linux/arm/v6 from the static musl builds, as the
# manifest list plantstore:VERSION (and plantstore:VERSION-ARCH each),
# then runs each image: the ARM ones under qemu-user-static through
# binfmt_misc. In each: /healthz, a POST, a graceful `podman stop` (exit
# 0), a start again that still holds the plant (the journal in /data,
# written as the image's numeric user), and no complaint about missing CA
# certificates with an https webhook configured.
#
#   scripts/release/container.sh
#
# Installs podman, runc, qemu-user-static and binfmt-support if missing
# (root or sudo), and mounts binfmt_misc if it is not. podman runs here
# with runc and cgroupfs and explicit open-file and process limits: this
# machine's cgroup v1 hybrid hierarchy makes crun refuse, and podman's
# default limits are above what it may set.
set -euo pipefail
cd "$(dirname "$0")/../.."

SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
need=()
command -v podman >/dev/null || need+=(podman)
command -v runc >/dev/null || need+=(runc)
[ -e /usr/libexec/qemu-binfmt/aarch64-binfmt-P ] || need+=(qemu-user-static binfmt-support)
[ ${#need[@]} -eq 0 ] || scripts/apt-install.sh "${need[@]}" >&2
if [ ! -e /proc/sys/fs/binfmt_misc/status ]; then
  $SUDO mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
fi
$SUDO update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || true
$SUDO update-binfmts --enable qemu-arm >/dev/null 2>&1 || true

VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
IMAGE=plantstore:$VERSION
PODMAN=($SUDO podman --runtime runc --cgroup-manager cgroupfs)
LIMITS=(--ulimit nofile=16384:16384 --ulimit nproc=4096:4096)

declare -A TARGET=(
  [amd64]=x86_64-unknown-linux-musl
  [arm64]=aarch64-unknown-linux-musl
  [arm]=arm-unknown-linux-musleabihf
)
declare -A PLATFORM=([amd64]=linux/amd64 [arm64]=linux/arm64 [arm]=linux/arm/v6)
ARCHS=(amd64 arm64 arm)

targets=()
for arch in "${ARCHS[@]}"; do targets+=("${TARGET[$arch]}"); done
scripts/release/release-build.sh "${targets[@]}" >/dev/null

CONTEXT=target/container
rm -rf "$CONTEXT"
mkdir -p "$CONTEXT/data"
for arch in "${ARCHS[@]}"; do
  install -D -m 0755 "${RELEASE_DIR:-target}/${TARGET[$arch]}/release/plantstore" "$CONTEXT/$arch/plantstore"
done
ca=/etc/ssl/certs/ca-certificates.crt
[ -s "$ca" ] || { echo "no CA bundle at $ca (install ca-certificates)" >&2; exit 1; }
cp "$ca" "$CONTEXT/ca-certificates.crt"

"${PODMAN[@]}" manifest rm "$IMAGE" >/dev/null 2>&1 || true
"${PODMAN[@]}" manifest create "$IMAGE" >/dev/null
for arch in "${ARCHS[@]}"; do
  echo "== $IMAGE for ${PLATFORM[$arch]}" >&2
  "${PODMAN[@]}" build -q --platform "${PLATFORM[$arch]}" -f Containerfile -t "$IMAGE-$arch" "$CONTEXT" >/dev/null
  # podman records no variant for arm/v6 in the image itself: the
  # manifest list says it, so that an ARMv6 host picks this image.
  variant=()
  [ "$arch" != arm ] || variant=(--variant v6)
  "${PODMAN[@]}" manifest add ${variant[@]+"${variant[@]}"} "$IMAGE" \
    "containers-storage:localhost/$IMAGE-$arch" >/dev/null
done
platforms=$("${PODMAN[@]}" manifest inspect "$IMAGE" | python3 -c '
import json, sys
print(" ".join(sorted("/".join(filter(None, (m["platform"]["os"], m["platform"]["architecture"],
    m["platform"].get("variant")))) for m in json.load(sys.stdin)["manifests"])))')
[ "$platforms" = "linux/amd64 linux/arm/v6 linux/arm64" ] ||
  { echo "FAIL: $IMAGE lists the platforms $platforms" >&2; exit 1; }

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
NAME=
cleanup() { [ -z "$NAME" ] || "${PODMAN[@]}" rm -f -v "$NAME" >/dev/null 2>&1 || true; }
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_healthy() {
  for _ in $(seq 1 300); do
    curl -sf "$URL/healthz" >/dev/null && return 0
    sleep 0.2
  done
  "${PODMAN[@]}" logs "$NAME" >&2 || true
  fail "$IMAGE-$1 did not answer /healthz"
}

for arch in "${ARCHS[@]}"; do
  echo "== $IMAGE-$arch: run" >&2
  got=$("${PODMAN[@]}" image inspect "$IMAGE-$arch" \
    --format '{{.Architecture}} {{.Config.User}} {{.Config.Healthcheck}}')
  [ "$got" = "$arch 65532:65532 <nil>" ] ||
    fail "$IMAGE-$arch: architecture, user, healthcheck are '$got'"
  port=$(free_port)
  URL=http://127.0.0.1:$port
  NAME=plantstore-check-$arch
  "${PODMAN[@]}" run -d --name "$NAME" --arch "$arch" "${LIMITS[@]}" -p "127.0.0.1:$port:8080" \
    -e PLANTSTORE_TOKEN=check -e PLANTSTORE_WEBHOOK=https://127.0.0.1:9/hook "$IMAGE-$arch" >/dev/null
  wait_healthy "$arch"
  status=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer check' \
    -H 'Content-Type: application/json' -d '{"id":1,"name":"Fern"}' "$URL/plants")
  [ "$status" = 200 ] || fail "$IMAGE-$arch: POST /plants answered $status"
  "${PODMAN[@]}" stop -t 10 "$NAME" >/dev/null
  code=$("${PODMAN[@]}" inspect "$NAME" --format '{{.State.ExitCode}}')
  [ "$code" = 0 ] || fail "$IMAGE-$arch: podman stop ended the server with exit code $code"
  "${PODMAN[@]}" start "$NAME" >/dev/null
  wait_healthy "$arch"
  got=$(curl -s -H 'Authorization: Bearer check' "$URL/plants/1")
  [ "$got" = '{"id":1,"name":"Fern"}' ] || fail "$IMAGE-$arch: after a restart GET /plants/1: $got"
  if "${PODMAN[@]}" logs "$NAME" 2>&1 | grep -q "no CA certificates"; then
    fail "$IMAGE-$arch: the server found no CA certificates"
  fi
  echo "   /healthz, POST, stop (exit 0), start, GET: ok" >&2
  "${PODMAN[@]}" rm -f -v "$NAME" >/dev/null
  NAME=
done

echo "| image | platform | bytes |"
echo "|---|---|---|"
for arch in "${ARCHS[@]}"; do
  echo "| $IMAGE-$arch | ${PLATFORM[$arch]} | $("${PODMAN[@]}" image inspect "$IMAGE-$arch" --format '{{.Size}}') |"
done
echo "$IMAGE: the manifest list of the three"
