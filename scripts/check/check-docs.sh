#!/usr/bin/env bash
# The docs' examples run: README.md's and docs/*.md's transcripts, curl
# commands and JavaScript snippets against the release build, each block
# on a fresh server (port 0 on loopback) in the state its doc states, so
# an example that goes stale fails with a diff. What is run, how it is
# compared and what is listed as not run: scripts/check/check-docs.py's header.
#
# Usage: scripts/check/check-docs.sh   (builds the release binary; every server
# and client it starts is stopped when its block is done, pass or fail).
# Needs curl and Node.js 20 or newer (global fetch and web streams).
set -euo pipefail
cd "$(dirname "$0")/../.."

command -v curl >/dev/null || scripts/apt-install.sh curl
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' 2>/dev/null || {
    echo "check-docs: needs Node.js 20 or newer (found: $(node --version 2>&1))" >&2
    exit 1
}

# The EventSource of the JavaScript examples: the npm eventsource package,
# installed where scripts/peer/peer-eventsource.sh keeps it.
INSTALL_ONLY=1 scripts/peer/peer-eventsource.sh
EVENTSOURCE=$PWD/.tools/eventsource-node/node_modules/eventsource
export EVENTSOURCE

# SERVE_BIN: a default build made already, run instead of building one.
[ -n "${SERVE_BIN:-}" ] || cargo build --release --quiet
exec python3 scripts/check/check-docs.py "${SERVE_BIN:-target/release/plantstore}"
