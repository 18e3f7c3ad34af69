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

# shellcheck source=scripts/serve-release.sh
. scripts/serve-release.sh
base="http://$addr"

curl -fsS "$base/openapi.json" -o "$serve_log.openapi.json"
"$venv/bin/openapi-spec-validator" "$serve_log.openapi.json"
rm -f "$serve_log.openapi.json"

"$venv/bin/st" --config-file scripts/schemathesis.toml run "$base/openapi.json" \
    --checks all \
    --seed 20261121 \
    --max-examples "$examples" \
    --header "Authorization: Bearer $token" \
    --no-color \
    --warnings off
