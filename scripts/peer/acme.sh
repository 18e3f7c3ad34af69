#!/usr/bin/env bash
# ACME against Debian's pebble (the ACME test CA) and a refusing CA of our
# own (scripts/peer/acme-fake.py), all on loopback, no step reaching the
# internet: the server built with the `acme` feature obtains a certificate
# through HTTP-01 (its --acme-http-addr listener is pebble's httpPort) and
# through TLS-ALPN-01 (its TLS listener is pebble's tlsPort), with --hsts
# answering Strict-Transport-Security over HTTPS; curl trusting
# only pebble's root (from its management interface) connects by name
# (--resolve); a restart serves the kept certificate without an order
# (the server's log and pebble's count of new orders), and one with another
# directory does not serve the certificate kept; a certificate of 30
# seconds (pebble's certificateValidityPeriod) is renewed at two thirds of
# its life and new connections get the new one; pebble refuses half the
# nonces (PEBBLE_WFE_NONCEREJECT=50) throughout and every order still
# completes; a challenge pebble cannot validate is logged with what pebble
# found. Against the refusing CA: a rate limit leaves the kept certificate
# serving and /metrics counting the failure and its expiry; a 500 before
# any certificate leaves the API answering 503 over HTTPS, and SIGHUP
# makes the server try again without waiting out its backoff; a directory
# answering HTML is a clear error. Names resolve
# through pebble-challtestsrv's DNS (loopback only). Every process is
# stopped on exit; every openssl s_client and curl is under a timeout, so
# a hang fails the script rather than stalling it. Installs pebble with
# apt when missing and fails if it still is. About 30 s once built.
#
#   scripts/peer/acme.sh                  # builds the release binary with --features acme
#   ACME_BIN=path scripts/peer/acme.sh
#   ACME_LOGS=DIR scripts/peer/acme.sh    # keeps every log in DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
trap 'exit 130' INT TERM
started=$(date +%s)

command -v pebble >/dev/null || scripts/apt-install.sh pebble
command -v pebble >/dev/null && command -v pebble-challtestsrv >/dev/null || {
    echo "FAIL: pebble is not installed (scripts/apt-install.sh pebble)" >&2; exit 1; }
command -v openssl >/dev/null || scripts/apt-install.sh openssl
command -v curl >/dev/null || scripts/apt-install.sh curl

bin=${ACME_BIN:-}
if [ -z "$bin" ]; then
    cargo build --release --quiet --features acme --target-dir target/acme
    bin=target/acme/release/plantstore
fi

work=$(mktemp -d)
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; pids=(); }
trap 'stop; [ -z "${ACME_LOGS:-}" ] || cp "$work"/*.log "$ACME_LOGS"/; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; for f in "$work"/*.log; do echo "--- $f" >&2; tail -20 "$f" >&2; done; exit 1; }
pass() { echo "ok: $*"; }

# Free loopback ports: pebble's, its management's, the DNS's, the
# server's TLS and HTTP-01 listeners (pebble must know these two), and one
# pebble does not know.
read -r p_acme p_mgmt p_dns p_tls p_http p_wrong < <(python3 -c '
import socket
s = [socket.socket() for _ in range(6)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')

# A test CA and a certificate for 127.0.0.1, for pebble's own HTTPS and
# the refusing CA's; the server trusts it with --acme-ca.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -keyout "$work/ca.key" -out "$work/ca.pem" -subj /CN=acme-test-ca 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/https.key" \
    -out "$work/https.csr" -subj /CN=127.0.0.1 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$work/san"
openssl x509 -req -in "$work/https.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" \
    -CAcreateserial -days 2 -extfile "$work/san" -out "$work/https.pem" 2>/dev/null

# Waits up to $3 seconds for the pattern $1 in the file $2.
wait_for() {
    for _ in $(seq $(($3 * 10))); do grep -q -- "$1" "$2" 2>/dev/null && return 0; sleep 0.1; done
    return 1
}

pebble-challtestsrv -dns01 "127.0.0.1:$p_dns" -http01 "" -https01 "" -tlsalpn01 "" \
    -management "127.0.0.1:$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')" \
    -defaultIPv4 127.0.0.1 -defaultIPv6 "" >"$work/dns.log" 2>&1 &
pids+=($!)

# pebble with certificates valid $1 seconds (0: its default, years).
start_pebble() {
    local validity=$1
    cat >"$work/pebble.json" <<JSON
{"pebble": {"listenAddress": "127.0.0.1:$p_acme", "managementListenAddress": "127.0.0.1:$p_mgmt",
 "certificate": "$work/https.pem", "privateKey": "$work/https.key",
 "httpPort": $p_http, "tlsPort": $p_tls, "ocspResponderURL": "",
 "externalAccountBindingRequired": false$( [ "$validity" -gt 0 ] && printf ', "certificateValidityPeriod": %d' "$validity")}}
JSON
    PEBBLE_VA_NOSLEEP=1 PEBBLE_VA_ALWAYS_VALID=0 PEBBLE_WFE_NONCEREJECT=50 PEBBLE_AUTHZREUSE=0 \
        pebble -config "$work/pebble.json" -dnsserver "127.0.0.1:$p_dns" >"$work/pebble.log" 2>&1 &
    pebble_pid=$!
    pids+=("$pebble_pid")
    wait_for "ACME directory available" "$work/pebble.log" 20 || fail "pebble did not start"
    curl -m 10 -sf --cacert "$work/ca.pem" "https://127.0.0.1:$p_mgmt/roots/0" >"$work/root.pem" \
        || fail "pebble's root could not be fetched"
}

# The server for the name $1 with the state directory $2, its log $3, and
# further flags; sets $server_pid.
start_server() {
    local name=$1 dir=$2 log=$3; shift 3
    PLANTSTORE_TOKEN=acme-test-token-0123456789 "$bin" --addr "127.0.0.1:$p_tls" \
        --acme-domain "$name" --acme-dir "$dir" --acme-ca "$work/ca.pem" "$@" >"$log" 2>&1 &
    server_pid=$!
    pids+=("$server_pid")
    wait_for "listening on https://" "$log" 10 || fail "the server did not start"
}
stop_server() { kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; }

# curl by name, trusting only $2's certificates; prints the status.
status_by_name() {
    curl -m 10 -s -o /dev/null -w '%{http_code}' --cacert "$2" --resolve "$1:$p_tls:127.0.0.1" \
        -H 'Authorization: Bearer acme-test-token-0123456789' "https://$1:$p_tls${3:-/plants}"
}
# The SHA-256 fingerprint of the certificate served for $1.
served() {
    timeout 10 openssl s_client -connect "127.0.0.1:$p_tls" -servername "$1" </dev/null 2>/dev/null \
        | openssl x509 -noout -fingerprint -sha256
}
orders() { grep -c "Added order" "$work/pebble.log" || true; }

directory="https://127.0.0.1:$p_acme/dir"
start_pebble 0

# HTTP-01, on the second, plain listener.
start_server http.acme.test "$work/http01" "$work/http01.log" \
    --acme-directory "$directory" --acme-http-addr "127.0.0.1:$p_http"
wait_for "ACME: new certificate for http.acme.test served" "$work/http01.log" 60 \
    || fail "no certificate through HTTP-01"
[ "$(status_by_name http.acme.test "$work/root.pem")" = 200 ] \
    || fail "curl trusting pebble's root did not get 200 from http.acme.test"
location=$(curl -m 10 -s -o /dev/null -w '%{redirect_url}' "http://127.0.0.1:$p_http/plants?x=1")
[ "$location" = "https://127.0.0.1:$p_tls/plants?x=1" ] || fail "the plain listener redirected to '$location'"
pass "HTTP-01: certificate obtained, curl trusting pebble's root connects, plain HTTP redirects (308)"

# A restart serves the kept certificate and orders nothing.
before=$(orders)
first=$(served http.acme.test)
stop_server
start_server http.acme.test "$work/http01" "$work/restart.log" \
    --acme-directory "$directory" --acme-http-addr "127.0.0.1:$p_http"
wait_for "ACME: serving the certificate kept in" "$work/restart.log" 10 || fail "the kept certificate was not served"
sleep 1
! grep -q "ACME: ordering" "$work/restart.log" || fail "the restart ordered a certificate"
[ "$(orders)" = "$before" ] || fail "pebble saw a new order after the restart"
[ "$(served http.acme.test)" = "$first" ] || fail "the restart serves another certificate"
[ "$(status_by_name http.acme.test "$work/root.pem")" = 200 ] || fail "no 200 after the restart"
stop_server
pass "restart: the kept certificate served, no new order (pebble's orders: $before)"

# Another directory (the same pebble under another name, as staging and
# production are two): the certificate kept from the first is not served.
start_server http.acme.test "$work/http01" "$work/moved.log" \
    --acme-directory "https://localhost:$p_acme/dir" --acme-http-addr "127.0.0.1:$p_http"
wait_for "ACME: new certificate for http.acme.test served" "$work/moved.log" 60 \
    || fail "no new certificate from another directory"
grep -q "was issued by $directory, not by https://localhost:$p_acme/dir: not served" "$work/moved.log" \
    || fail "the log does not say the kept certificate is another directory's"
! grep -q "ACME: serving the certificate kept in" "$work/moved.log" || fail "another directory's certificate was served"
[ "$(served http.acme.test)" != "$first" ] || fail "new connections still get the other directory's certificate"
[ "$(status_by_name http.acme.test "$work/root.pem")" = 200 ] || fail "no 200 with the new directory's certificate"
stop_server
pass "another directory: its certificate is not served, a new one is ordered"

# TLS-ALPN-01, on the TLS listener.
start_server alpn.acme.test "$work/alpn" "$work/alpn.log" --acme-directory "$directory" --hsts 600
wait_for "ACME: new certificate for alpn.acme.test served" "$work/alpn.log" 60 \
    || fail "no certificate through TLS-ALPN-01"
[ "$(status_by_name alpn.acme.test "$work/root.pem")" = 200 ] \
    || fail "curl trusting pebble's root did not get 200 from alpn.acme.test"
# --hsts goes with ACME as with the other sources of HTTPS.
hsts=$(curl -m 10 -s -o /dev/null -D - --cacert "$work/root.pem" --resolve "alpn.acme.test:$p_tls:127.0.0.1" \
    -H 'Authorization: Bearer acme-test-token-0123456789' "https://alpn.acme.test:$p_tls/plants" | tr -d '\r')
grep -qix 'strict-transport-security: max-age=600' <<<"$hsts" || fail "no Strict-Transport-Security with --hsts: $hsts"
stop_server
pass "TLS-ALPN-01: certificate obtained, curl trusting pebble's root connects, --hsts sent"

# A challenge that never validates: HTTP-01 answered on a port pebble does
# not ask; the log says what the CA found.
start_server never.acme.test "$work/never" "$work/never.log" \
    --acme-directory "$directory" --acme-http-addr "127.0.0.1:$p_wrong"
wait_for "ACME: cannot obtain a certificate for never.acme.test: the challenge failed" "$work/never.log" 60 \
    || fail "a challenge that cannot validate was not reported as such"
[ ! -e "$work/never/cert.pem" ] || fail "a certificate was kept for a challenge that failed"
stop_server
pass "a challenge that never validates: the log says what the CA found ($(grep -o 'the challenge failed: [^;]*' "$work/never.log" | head -c 120))"

# Renewal: certificates of 30 s are renewed at 20 s, without a restart.
kill "$pebble_pid"; wait "$pebble_pid" 2>/dev/null || true
start_pebble 30
start_server renew.acme.test "$work/renew" "$work/renew.log" --acme-directory "$directory"
wait_for "ACME: new certificate for renew.acme.test served" "$work/renew.log" 60 || fail "no first certificate"
first=$(served renew.acme.test)
for _ in $(seq 400); do
    [ "$(grep -c "ACME: new certificate for renew.acme.test served" "$work/renew.log")" -ge 2 ] && break
    sleep 0.1
done
[ "$(grep -c "ACME: new certificate for renew.acme.test served" "$work/renew.log")" -ge 2 ] \
    || fail "the certificate was not renewed"
[ "$(served renew.acme.test)" != "$first" ] || fail "new connections still get the old certificate"
[ "$(status_by_name renew.acme.test "$work/root.pem")" = 200 ] || fail "no 200 after the renewal"
stop_server
pass "renewal: a new certificate served at two thirds of the old one's life"
# Every order above ran with half the nonces refused: without sending
# them again (order.rs, on top of the library's three tries) an order of
# a dozen requests rarely completes, and this script fails at its first.
grep -q "Configured to reject 50% of good nonces" "$work/pebble.log" || fail "pebble did not reject nonces"
pass "pebble's nonce rejection (50%) survived by every order"
stop

# The refusing CA: a rate limit with a kept certificate, past two thirds.
start_fake() {
    python3 scripts/peer/acme-fake.py "$1" "$work/https.pem" "$work/https.key" >"$work/fake.log" 2>&1 &
    pids+=($!)
    wait_for "listening on" "$work/fake.log" 10 || fail "the fake CA did not start"
    fake="https://$(sed -n 's/listening on //p' "$work/fake.log")/dir"
}
mkdir -m 0700 "$work/limited"
printf 'subjectAltName=DNS:kept.acme.test\n' >"$work/kept-san"
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/limited/key.pem" \
    -out "$work/kept.csr" -subj /CN=kept.acme.test 2>/dev/null
# Valid from 25 days ago for 30: within its life, past two thirds of it
# (openssl ca, which takes a start date).
read -r -a dates < <(python3 -c 'import time
f = lambda d: time.strftime("%Y%m%d%H%M%SZ", time.gmtime(time.time() + d * 86400))
print(f(-25), f(5))')
touch "$work/index.txt"
printf '[ca]\ndefault_ca=d\n[d]\ndatabase=%s/index.txt\nnew_certs_dir=%s\nserial=%s/serial\ndefault_md=sha256\npolicy=p\n[p]\ncommonName=supplied\n' \
    "$work" "$work" "$work" >"$work/ca.cnf"
echo 07 >"$work/serial"
openssl ca -batch -notext -config "$work/ca.cnf" -cert "$work/ca.pem" -keyfile "$work/ca.key" \
    -in "$work/kept.csr" -out "$work/limited/cert.pem" -extfile "$work/kept-san" \
    -startdate "${dates[0]}" -enddate "${dates[1]}" 2>/dev/null || fail "the kept certificate could not be made"
start_fake ratelimited
printf '%s\n' "$fake" >"$work/limited/cert.directory"
start_server kept.acme.test "$work/limited" "$work/limited.log" --acme-directory "$fake"
wait_for "ACME: cannot obtain a certificate for kept.acme.test" "$work/limited.log" 30 || fail "no failure logged"
grep -q "rateLimited" "$work/limited.log" || fail "the log does not say the CA answered rateLimited"
grep -q "the certificate in use stays" "$work/limited.log" || fail "the log does not say the old certificate stays"
[ "$(status_by_name kept.acme.test "$work/ca.pem")" = 200 ] || fail "the kept certificate is not served"
metrics=$(curl -m 10 -s --cacert "$work/ca.pem" --resolve "kept.acme.test:$p_tls:127.0.0.1" \
    -H 'Authorization: Bearer acme-test-token-0123456789' "https://kept.acme.test:$p_tls/metrics")
grep -q '^plantstore_acme_failures_total 1$' <<<"$metrics" || fail "/metrics does not count the failure"
grep -Eq '^plantstore_acme_last_failure_timestamp_seconds [1-9][0-9]+$' <<<"$metrics" \
    || fail "/metrics has no last failure time"
# The expiry is the kept certificate's: about 5 days off.
expiry=$(sed -n 's/^plantstore_tls_certificate_expiry_seconds //p' <<<"$metrics")
[ -n "$expiry" ] && [ "$expiry" -gt 400000 ] && [ "$expiry" -lt 440000 ] \
    || fail "/metrics gives the expiry '$expiry', not the kept certificate's"
stop_server
pass "rate limited: the kept certificate serves, /metrics counts the failure and gives its expiry"
stop

# A CA answering 500 before any certificate: HTTPS answers 503.
start_fake 500
start_server none.acme.test "$work/none" "$work/none.log" --acme-directory "$fake"
wait_for "ACME: cannot obtain a certificate for none.acme.test" "$work/none.log" 30 || fail "no failure logged"
grep -q "no certificate yet: HTTPS answers 503" "$work/none.log" || fail "the log does not say HTTPS answers 503"
answer=$(curl -m 10 -sk -H 'Authorization: Bearer acme-test-token-0123456789' "https://127.0.0.1:$p_tls/plants" -w ' %{http_code}')
[[ "$answer" == *"no certificate yet: ACME order in progress"*" 503" ]] || fail "the API answered '$answer' before a certificate"
pass "500 before a certificate: the API answers 503 over HTTPS, the log says why"
# SIGHUP ends the minute's wait after the failure: the next order now.
grep -q "refused order 1$" "$work/fake.log" || fail "the fake CA saw no order"
kill -HUP "$server_pid"
wait_for "refused order 2$" "$work/fake.log" 10 || fail "SIGHUP did not make the ACME thread try again"
pass "SIGHUP: the ACME thread tries again at once"
stop

# A directory that answers garbage: a clear error, still 503.
start_fake garbage
start_server junk.acme.test "$work/junk" "$work/junk.log" --acme-directory "$fake"
wait_for "ACME: cannot obtain a certificate for junk.acme.test" "$work/junk.log" 30 || fail "no failure logged"
grep -q "JSON" "$work/junk.log" || fail "the log does not say the directory is not JSON"
pass "a directory answering garbage: $(grep -o 'cannot make an ACME account: [^;]*' "$work/junk.log" | head -c 120)"
stop
echo "acme: every check passed in $(($(date +%s) - started)) s"
