#!/usr/bin/env bash
# Builds plantstore for ARM and drives real requests against each binary
# under qemu-user, over HTTP and then over HTTPS (a certificate made here
# by openssl, trusted by the client): create (200), duplicate (409), bad
# token (401), bad body (400), list (200, holding the plant). Prints each
# binary's stripped size.
#
#   scripts/cross-smoke.sh [TARGET...]
#
# Default targets: aarch64-unknown-linux-gnu (64-bit Pi OS),
# armv7-unknown-linux-gnueabihf (Pi 2/3/4, 32-bit) and
# arm-unknown-linux-musleabihf (ARMv6: Pi Zero/1, static, run with
# -cpu arm1176).
#
# No Docker here, and rustup cannot add targets: scripts/release-build.sh
# builds each binary with Debian's Rust, rebuilding the standard library for
# the target (-Z build-std), as the release workflow does with `cross`.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(
  aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf arm-unknown-linux-musleabihf)

if ! command -v qemu-arm >/dev/null || ! command -v qemu-aarch64 >/dev/null; then
  echo "installing qemu-user" >&2
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends qemu-user >&2
fi

# The binaries, built as they are published (installs the toolchains).
scripts/release-build.sh "${TARGETS[@]}" >/dev/null

# qemu command line for a target's binary.
runner() {
  case $1 in
    aarch64-unknown-linux-gnu) echo "qemu-aarch64 -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib -L /usr/aarch64-linux-gnu" ;;
    armv7-unknown-linux-gnueabihf) echo "qemu-arm -L /usr/arm-linux-gnueabihf" ;;
    arm-unknown-linux-musleabihf) echo "qemu-arm -cpu arm1176" ;;
    aarch64-*) echo "qemu-aarch64" ;;
    *) echo "qemu-arm" ;;
  esac
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

PID=
LOG=$(mktemp)
CERTS=$(mktemp -d)
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  rm -rf "$LOG" "$CERTS"
}
trap cleanup EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -keyout "$CERTS/key.pem" -out "$CERTS/cert.pem" -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost 2>/dev/null

declare -A SIZES
for target in "${TARGETS[@]}"; do
  bin=target/$target/release/plantstore
  SIZES[$target]=$(stat -c %s "$bin")

  for scheme in http https; do
  echo "== $target: smoke test over $scheme under $(runner "$target" | cut -d' ' -f1)" >&2
  port=$(free_port)
  tls=()
  [ $scheme = http ] || tls=(--tls-cert "$CERTS/cert.pem" --tls-key "$CERTS/key.pem")
  # shellcheck disable=SC2046
  PLANTSTORE_TOKEN=smoke $(runner "$target") "$bin" --addr "127.0.0.1:$port" ${tls[@]+"${tls[@]}"} 2>"$LOG" &
  PID=$!
  python3 - "$port" "$scheme" "$CERTS/cert.pem" <<'PY' || { cat "$LOG" >&2; exit 1; }
import json, ssl, sys, time, urllib.error, urllib.request

scheme = sys.argv[2]
base = f"{scheme}://localhost:{sys.argv[1]}"
context = ssl.create_default_context(cafile=sys.argv[3]) if scheme == "https" else None

def call(method, path, body=None, token="smoke"):
    req = urllib.request.Request(base + path, method=method,
                                 data=None if body is None else body.encode())
    req.add_header("Authorization", f"Bearer {token}")
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10, context=context) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()

for _ in range(300):  # up to 30 s for qemu to start the binary
    try:
        urllib.request.urlopen(base + "/healthz", timeout=1, context=context)
        break
    except OSError:
        time.sleep(0.1)

checks = [
    ("create", call("POST", "/plants", '{"id":1,"name":"Fern","tag":"green"}'), 200,
     {"name": "Fern", "tag": "green"}),
    ("duplicate", call("POST", "/plants", '{"id":1,"name":"Moss"}'), 409, None),
    ("bad token", call("POST", "/plants", '{"id":2,"name":"x"}', token="wrong"), 401, None),
    ("bad body", call("POST", "/plants", '{"id":"two","name":"x"}'), 400, None),
    ("list", call("GET", "/plants"), 200, [{"id": 1, "name": "Fern", "tag": "green"}]),
]
failed = False
for name, (status, body), want_status, want_body in checks:
    ok = status == want_status and (want_body is None or json.loads(body) == want_body)
    if want_body is None and status >= 400:
        ok = ok and json.loads(body).get("error") == status
    print(f"   {name}: {status} {'ok' if ok else 'WRONG: ' + body.decode(errors='replace')}",
          file=sys.stderr)
    failed |= not ok
sys.exit(1 if failed else 0)
PY
  kill "$PID" && wait "$PID" 2>/dev/null || true
  PID=
  done
done

echo "| target | stripped binary bytes | KiB |"
echo "|---|---|---|"
for target in "${TARGETS[@]}"; do
  echo "| $target | ${SIZES[$target]} | $(( SIZES[$target] / 1024 )) |"
done
