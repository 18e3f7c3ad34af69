#!/usr/bin/env bash
# Conformance: run schemathesis, every check on, against the release binary
# and its own /openapi.json; also validate the document as OpenAPI 3.1.
#
# Usage: scripts/peer/conformance.sh [EXAMPLES_PER_OPERATION] [--postgres] [--no-flags]
#        (default 200 examples)
#
# The document describes exactly the server that serves it: by default the
# server runs with every flag that adds a route (--allow-reset), so that
# each is checked; --no-flags runs it with none, where the document must
# leave those routes out.
# Installs schemathesis and openapi-spec-validator into .venv-conformance.
#
# --postgres: the server built with the postgres feature (in
# target/postgres, so the default release binary is left alone) and started
# with --database, on a fresh database `plantstore_conformance` made for the
# run on the PostgreSQL that PLANTSTORE_TEST_DATABASE names and dropped after
# it; run it as `scripts/with-postgres.sh scripts/peer/conformance.sh 200
# --postgres`.
set -euo pipefail
cd "$(dirname "$0")/../.."

examples=200
postgres=
no_flags=
for arg in "$@"; do
    case $arg in
        --postgres) postgres=1 ;;
        --no-flags) no_flags=1 ;;
        *[!0-9]* | '') echo "usage: scripts/peer/conformance.sh [EXAMPLES] [--postgres] [--no-flags]" >&2; exit 2 ;;
        *) examples=$arg ;;
    esac
done
venv=.venv-conformance
token=conformance-token

# Every flag that adds a route or headers: POST /plants/reset is then in
# the document, served, and checked like every other operation (no
# --seed: a reset leaves no plants); CORS adds its headers to answers.
serve_args=(--allow-reset --cors-origin https://app.example)
[ -z "$no_flags" ] || serve_args=()
if [ -n "$postgres" ]; then
    [ -n "${PLANTSTORE_TEST_DATABASE:-}" ] || {
        echo "PLANTSTORE_TEST_DATABASE is not set: run it through scripts/with-postgres.sh" >&2
        exit 2
    }
    # The same server and credentials, another database (the URL's last
    # path segment), empty like the in-memory store at start.
    database=plantstore_conformance
    psql -q -X -v ON_ERROR_STOP=1 -d "$PLANTSTORE_TEST_DATABASE" -c "SET client_min_messages = warning" \
        -c "DROP DATABASE IF EXISTS $database WITH (FORCE)" -c "CREATE DATABASE $database"
    serve_features=postgres
    serve_args+=(--database "${PLANTSTORE_TEST_DATABASE%/*}/$database")
fi

if [ ! -x "$venv/bin/st" ] || [ ! -x "$venv/bin/openapi-spec-validator" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet 'schemathesis>=4,<5' 'openapi-spec-validator>=0.7'
fi
[ -z "${INSTALL_ONLY:-}" ] || exit 0  # scripts/ci/ci-prepare.sh: install only

if [ -n "$postgres" ]; then
    serve_on_exit='psql -q -X -d "$PLANTSTORE_TEST_DATABASE" -c "DROP DATABASE $database WITH (FORCE)" || true'
fi
# shellcheck source=scripts/serve-release.sh
. scripts/serve-release.sh
base="http://$addr"

curl -fsS "$base/openapi.json" -o "$serve_log.openapi.json"
"$venv/bin/openapi-spec-validator" "$serve_log.openapi.json"
rm -f "$serve_log.openapi.json"

# The change feed is left out: its answer is an endless stream, which
# schemathesis would wait on until its timeout. tests/integration/api/
# changes.rs checks it instead.
"$venv/bin/st" --config-file scripts/peer/schemathesis.toml run "$base/openapi.json" \
    --exclude-path /plants/changes \
    --checks all \
    --seed 20261121 \
    --max-examples "$examples" \
    --header "Authorization: Bearer $token" \
    --no-color \
    --warnings off
