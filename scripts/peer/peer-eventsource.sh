#!/usr/bin/env bash
# The change feed (GET /plants/changes) read by a client written by others:
# the `eventsource` npm package, the WHATWG EventSource for Node, on the
# release build. scripts/peer/peer-eventsource.mjs opens the feed as a browser
# does, with a ticket in the URL and no Authorization header, through a TCP
# proxy it controls, makes changes, cuts the connection, makes more while
# the client is out, and lets it back in: the client must reconnect by
# itself, with the ticket and Last-Event-ID, and receive every change
# exactly once, in order, with no reset (the server keeps running, so its
# epoch holds).
#
# Usage: scripts/peer/peer-eventsource.sh   (builds and starts the release
# binary on port 0; everything it starts is stopped on exit). Installs
# eventsource into .tools/eventsource-node.
#
# To see it fail: PEER_EVENTSOURCE_BREAK=drop (the proxy drops an event)
# or PEER_EVENTSOURCE_BREAK=skip (a reconnection resumes one event late).
set -euo pipefail
cd "$(dirname "$0")/../.."
started=$SECONDS

# 4.x: the last line that runs on Node 20 (5.x asks for Node 22); it and
# scripts/peer/peer-eventsource.mjs need Node 20's global fetch and streams.
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' 2>/dev/null || {
    echo "peer-eventsource: needs Node.js 20 or newer (found: $(node --version 2>&1))" >&2
    exit 1
}
node_dir=.tools/eventsource-node
eventsource_version=4.1.1
installed=$(node -p "require('./$node_dir/node_modules/eventsource/package.json').version" 2>/dev/null || true)
if [ "$installed" != "$eventsource_version" ]; then
    mkdir -p "$node_dir"
    (cd "$node_dir" && npm install --silent --no-audit --no-fund --save-exact --prefix . \
        "eventsource@$eventsource_version" >/dev/null)
fi
[ -z "${INSTALL_ONLY:-}" ] || exit 0  # scripts/ci/ci-prepare.sh: install only

token=peer-token
# shellcheck source=scripts/serve-release.sh
. scripts/serve-release.sh

node scripts/peer/peer-eventsource.mjs "$node_dir" "http://$addr" "$token"
echo "peer-eventsource: passed in $((SECONDS - started)) s"
