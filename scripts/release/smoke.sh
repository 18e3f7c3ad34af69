#!/usr/bin/env bash
# Drives real requests against one plantstore binary over HTTP and then
# over HTTPS (a certificate made here by openssl, trusted by the client):
# create (200), duplicate (409), bad token (401), bad body (400), list
# (200, holding the plant). An ARM binary runs under qemu-user (installed
# if missing), the ARMv6 one with -cpu arm1176.
#
#   scripts/release/smoke.sh TARGET BINARY
#
# TARGET is the Rust target BINARY was built for. scripts/release/cross-smoke.sh
# runs it on the binaries it builds, scripts/release/check-deb.sh on those the
# Debian packages carry.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: scripts/release/smoke.sh TARGET BINARY" >&2; exit 2; }
TARGET=$1
BIN=$2

# How to run a binary of TARGET here: natively, or under qemu-user.
case $TARGET in
  x86_64-*) RUN= ;;
  aarch64-unknown-linux-gnu) RUN="qemu-aarch64 -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib -L /usr/aarch64-linux-gnu" ;;
  armv7-unknown-linux-gnueabihf) RUN="qemu-arm -L /usr/arm-linux-gnueabihf" ;;
  arm-unknown-linux-musleabihf) RUN="qemu-arm -cpu arm1176" ;;
  aarch64-*) RUN="qemu-aarch64" ;;
  *) RUN="qemu-arm" ;;
esac

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

if [ -n "$RUN" ] && ! command -v "${RUN%% *}" >/dev/null; then
  "$(dirname "$0")/../apt-install.sh" qemu-user >&2
fi

for scheme in http https; do
echo "== $BIN ($TARGET): smoke test over $scheme${RUN:+ under ${RUN%% *}}" >&2
port=$(free_port)
tls=()
[ $scheme = http ] || tls=(--tls-cert "$CERTS/cert.pem" --tls-key "$CERTS/key.pem")
# shellcheck disable=SC2086 # $RUN is a command line
PLANTSTORE_TOKEN=smoke $RUN "$BIN" --addr "127.0.0.1:$port" ${tls[@]+"${tls[@]}"} 2>"$LOG" &
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
