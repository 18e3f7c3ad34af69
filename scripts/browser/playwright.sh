#!/usr/bin/env bash
# The Playwright example (examples/playwright/) on the release build: its
# tests start plantstore themselves with --delay, --allow-reset and the
# example's seed, reset it before each test and drive the built-in page in
# Debian's headless Chromium (see examples/playwright/README.md for what
# they check). This is the example exactly as a user runs it, with npm ci
# from its package-lock.json, so a stale example fails here.
#
# Usage: scripts/browser/playwright.sh   (builds the release binary; bounded by
# PLAYWRIGHT_TIMEOUT seconds, default 180; every process it starts, the
# servers and browsers of the test run included, is stopped on exit).
# Installs Debian's chromium with apt when missing, and the example's npm
# packages into examples/playwright/node_modules when they are not the
# lock's. Playwright is pointed at /usr/bin/chromium, so it downloads no
# browser of its own.
set -euo pipefail
cd "$(dirname "$0")/../.."
started=$SECONDS

node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' 2>/dev/null || {
    echo "playwright: needs Node.js 20 or newer (found: $(node --version 2>&1))" >&2
    exit 1
}
chromium=/usr/bin/chromium
[ -x "$chromium" ] || scripts/apt-install.sh --with-recommends chromium
[ -x "$chromium" ] || { echo "playwright: $chromium is missing and could not be installed" >&2; exit 1; }

# npm ci empties node_modules first: only when what is there differs from
# the lock, package by package.
example=examples/playwright
same_as_lock() {
    # shellcheck disable=SC2016 # JavaScript's template string, not the shell's
    (cd "$example" && node -e '
        const lock = require("./package-lock.json").packages;
        for (const [where, { version }] of Object.entries(lock)) {
          if (where && require(`./${where}/package.json`).version !== version) process.exit(1);
        }' 2>/dev/null)
}
if ! same_as_lock; then
    (cd "$example" && npm ci --silent --no-audit --no-fund >/dev/null)
    same_as_lock || { echo "playwright: npm ci did not install $example/package-lock.json" >&2; exit 1; }
fi
[ -z "${INSTALL_ONLY:-}" ] || exit 0  # scripts/ci/ci-prepare.sh: install only

# SERVE_BIN: a default build made already, served instead of building one.
[ -n "${SERVE_BIN:-}" ] || cargo build --release --quiet

# timeout leads a process group of its own: the test runner, its workers
# and the servers they start are in it, and are all stopped on exit. (Each
# Chromium leads a group too; it ends when its worker closes its pipe.)
bin=${SERVE_BIN:-$PWD/target/release/plantstore}
(cd "$example" && PLANTSTORE_BIN=$bin CHROMIUM=$chromium \
    exec timeout --kill-after=10 "${PLAYWRIGHT_TIMEOUT:-180}" node_modules/.bin/playwright test) &
run=$!
trap 'kill -- "-$run" 2>/dev/null || true; wait "$run" 2>/dev/null || true' EXIT
wait "$run"
echo "playwright: passed in $((SECONDS - started)) s"
