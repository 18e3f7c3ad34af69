#!/usr/bin/env bash
# Conformance: run schemathesis, every check on, against the release binary
# and its own /openapi.json; also validate the document as OpenAPI 3.1.
#
# Usage: scripts/conformance.sh [EXAMPLES_PER_OPERATION]   (default 200)
# Installs schemathesis and openapi-spec-validator into .venv-conformance.
set -euo pipefail
cd "$(dirname "$0")/.."

examples=${1:-200}
venv=.venv-conformance
token=conformance-token

if [ ! -x "$venv/bin/st" ] || [ ! -x "$venv/bin/openapi-spec-validator" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet 'schemathesis>=4,<5' 'openapi-spec-validator>=0.7'
fi

cargo build --release --quiet

# A free loopback port: the server binds port 0 and reports the real one.
log=$(mktemp)
PLANTSTORE_TOKEN=$token ./target/release/plantstore --addr 127.0.0.1:0 2>"$log" &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -f "$log"' EXIT
addr=
for _ in $(seq 100); do
    addr=$(grep -o 'listening on http://[^,]*' "$log" | sed 's|listening on http://||' || true)
    [ -n "$addr" ] && break
    sleep 0.05
done
[ -n "$addr" ] || { echo "server did not start"; cat "$log"; exit 1; }
base="http://$addr"

curl -fsS "$base/openapi.json" -o "$log.openapi.json"
"$venv/bin/openapi-spec-validator" "$log.openapi.json"
rm -f "$log.openapi.json"

"$venv/bin/st" run "$base/openapi.json" \
    --checks all \
    --seed 20261121 \
    --max-examples "$examples" \
    --header "Authorization: Bearer $token" \
    --no-color \
    --warnings off
