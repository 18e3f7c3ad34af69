#!/usr/bin/env bash
# The browser side in real headless Chromium, driven by Selenium
# (scripts/browser/browser.py): a page from another origin calling the API with
# fetch() with and without --cors-origin, and the built-in page at / used
# as a person would, over HTTP and over HTTPS (a self-signed certificate
# whose key the browser is told to trust), following the change feed with
# EventSource across a ticket's expiry (a server with --ticket-ttl 2 and a
# read token, scripts/browser/browser_feed.py), with screenshots in
# target/screenshots/.
#
# Installs Debian's chromium and chromium-driver with apt when missing (and
# fails if it cannot), Selenium into .venv-browser. Selenium is pointed at
# /usr/bin/chromedriver and /usr/bin/chromium, so it downloads nothing.
# Every process it starts is stopped on exit; the browser part is bounded
# by BROWSER_TIMEOUT seconds (default 300).
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    sudo=; [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium chromium-driver >/dev/null
fi
for tool in /usr/bin/chromium /usr/bin/chromedriver; do
    [ -x "$tool" ] || { echo "browser: $tool is missing and could not be installed" >&2; exit 1; }
done

venv=.venv-browser
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import selenium' 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet 'selenium==4.51.0'
fi
[ -z "${INSTALL_ONLY:-}" ] || exit 0  # scripts/ci/ci-prepare.sh: install only

# SERVE_BIN: a default build made already, served instead of building one.
bin=${SERVE_BIN:-$PWD/target/release/plantstore}
[ -n "${SERVE_BIN:-}" ] || cargo build --release --quiet

token=browser-token
work=$(mktemp -d)
pids=()
stop() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap stop EXIT

# Waits for PATTERN (a sed -n expression printing the address) in LOG.
address() {
    local log=$1 pattern=$2 found=
    for _ in $(seq 200); do
        found=$(sed -n "$pattern" "$log" | head -n 1)
        [ -n "$found" ] && { echo "$found"; return; }
        sleep 0.05
    done
    echo "browser: no address in $log:" >&2
    cat "$log" >&2
    exit 1
}

# Another origin: a static server for tests/browser/ on a free port.
python3 -u -m http.server 0 --bind 127.0.0.1 --directory tests/browser >"$work/static.log" 2>&1 &
pids+=($!)
static_port=$(address "$work/static.log" 's/.* port \([0-9]*\) .*/\1/p')
static="http://127.0.0.1:$static_port"

serve() {
    local log=$1; shift
    PLANTSTORE_TOKEN=$token "$bin" --addr 127.0.0.1:0 "$@" 2>"$log" &
    pids+=($!)
}
# With --data: the changes the page makes are answered after the sync,
# from the journal's committer thread.
serve "$work/cors.log" --cors-origin "$static" --data "$work/plants.journal"
serve "$work/plain.log"
# Over HTTPS, with a self-signed certificate; the browser is told to trust
# its public key (SPKI: the SHA-256 of the key, base64).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -keyout "$work/key.pem" -out "$work/cert.pem" -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 2>/dev/null
spki=$(openssl x509 -in "$work/cert.pem" -pubkey -noout | openssl pkey -pubin -outform der |
    openssl dgst -sha256 -binary | base64)
serve "$work/https.log" --tls-cert "$work/cert.pem" --tls-key "$work/key.pem"
# Tickets that expire within the check, and a read token beside the token.
reader=browser-reader-token
printf '%s\n%s read\n' "$token" "$reader" >"$work/tokens"
serve "$work/feed.log" --token-file "$work/tokens" --ticket-ttl 2
cors_api="http://$(address "$work/cors.log" 's|.*listening on http://\([^,]*\),.*|\1|p')"
plain_api="http://$(address "$work/plain.log" 's|.*listening on http://\([^,]*\),.*|\1|p')"
https_api="https://$(address "$work/https.log" 's|.*listening on https://\([^,]*\),.*|\1|p')"
feed_api="http://$(address "$work/feed.log" 's|.*listening on http://\([^,]*\),.*|\1|p')"

shots=target/screenshots
mkdir -p "$shots"
SE_OFFLINE=true timeout --kill-after=10 "${BROWSER_TIMEOUT:-300}" \
    "$venv/bin/python" -u scripts/browser/browser.py "$static" "$cors_api" "$plain_api" "$token" "$shots" \
    "$https_api" "$spki" "$feed_api" "$reader"
