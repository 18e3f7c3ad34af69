#!/usr/bin/env bash
# Generated API clients: what a front-end developer gets from the server's
# own /openapi.json with the generators they already use.
#
#   - openapi-generator (the PyPI package openapi-generator-cli, which
#     bundles the generator; it runs on Java, installed with apt when
#     missing): typescript-fetch and python. Every operation of the document
#     must be generated; the TypeScript compiles with `tsc --strict`. Both
#     run against a server: the Python client creates, lists, reads and
#     deletes a plant (scripts/clients/generated-clients.py), and each searches,
#     sorts both ways, counts, pages and chooses fields, checking every
#     answer (scripts/clients/generated-clients.py and .ts, the latter compiled and
#     run with node).
#   - openapi-typescript (npm): its types compile with `tsc --strict`.
#
# openapi-generator writes one API class per tag, and an untagged
# operation goes to DefaultApi: with no tags, the webhook's DefaultApi
# replaced the one of every path, and the clients had no operation at all.
# Every operation and the webhook have a tag (plants, changes, operations,
# webhooks), so each is generated.
#
# Usage: scripts/clients/generated-clients.sh   (builds the server; every process it
# starts is stopped on exit). Installs into .venv-generators and
# .generators-node.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v java >/dev/null; then
    sudo=; [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
        openjdk-17-jre-headless >/dev/null
fi
venv=.venv-generators
if [ ! -x "$venv/bin/openapi-generator-cli" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet 'openapi-generator-cli==7.26.0'
fi
node_dir=.generators-node
if [ ! -x "$node_dir/node_modules/.bin/tsc" ] || [ ! -x "$node_dir/node_modules/.bin/openapi-typescript" ]; then
    mkdir -p "$node_dir"
    (cd "$node_dir" && npm install --silent --no-audit --no-fund --prefix . \
        typescript@5.9.3 openapi-typescript@7.10.1 >/dev/null)
fi
[ -z "${INSTALL_ONLY:-}" ] || exit 0  # scripts/ci/ci-prepare.sh: install only

cargo build --quiet --bin plantstore
work=$(mktemp -d)
server_pid=
stop() {
    [ -z "$server_pid" ] || { kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; }
    rm -rf "$work"
}
trap stop EXIT
token=generators-token
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
PLANTSTORE_TOKEN=$token target/debug/plantstore --addr "127.0.0.1:$port" --log-level warn 2>"$work/server.log" &
server_pid=$!
for _ in $(seq 1 200); do
    curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    sleep 0.05
done
curl -fsS "http://127.0.0.1:$port/openapi.json" -o "$work/openapi.json"

generate() {
    "$venv/bin/openapi-generator-cli" generate -i "$work/openapi.json" -g "$1" -o "$work/$1" \
        --additional-properties="$2" >"$work/$1.log" 2>&1 || { cat "$work/$1.log" >&2; exit 1; }
}
generate typescript-fetch supportsES6=true
generate python packageName=plantstore_client,projectName=plantstore-client

# Every operation of the document is in each client.
operations=$(python3 -c 'import json, sys
doc = json.load(open(sys.argv[1]))
print(" ".join(op["operationId"] for item in doc["paths"].values()
               for method, op in item.items() if method in ("get", "head", "post", "put", "delete")))' \
    "$work/openapi.json")
missing=()
for op in $operations; do
    grep -rqs "$op" "$work/typescript-fetch/apis" || missing+=("typescript-fetch:$op")
    snake=$(python3 -c 'import re, sys; print(re.sub(r"(?<!^)(?=[A-Z])", "_", sys.argv[1]).lower())' "$op")
    grep -rqs "def $snake(" "$work/python/plantstore_client/api" || missing+=("python:$snake")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "clients: operations missing from the generated clients: ${missing[*]}" >&2
    exit 1
fi
echo "clients: ok: typescript-fetch and python have all $(wc -w <<<"$operations") operations"

# The TypeScript compiles, strictly, with the check that uses it.
tsc=$node_dir/node_modules/.bin/tsc
cp scripts/clients/generated-clients.ts "$work/check.ts"
"$tsc" --strict --target es2020 --module commonjs --moduleResolution node \
    --lib es2020,dom --outDir "$work/ts-out" "$work/check.ts"
"$node_dir/node_modules/.bin/openapi-typescript" "$work/openapi.json" -o "$work/schema.d.ts" >/dev/null
"$tsc" --strict --noEmit "$work/schema.d.ts"
echo "clients: ok: the typescript-fetch client and openapi-typescript's types compile with tsc --strict"

# Both clients against the running server, the store empty each time.
"$venv/bin/pip" install --quiet "$work/python"
"$venv/bin/python" scripts/clients/generated-clients.py "http://127.0.0.1:$port" "$token"
node "$work/ts-out/check.js" "http://127.0.0.1:$port" "$token"
