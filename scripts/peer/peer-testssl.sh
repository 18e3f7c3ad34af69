#!/usr/bin/env bash
# Debian's testssl (package testssl.sh) against the TLS listener of the
# release binary on loopback, with a throwaway certificate made here by
# openssl: protocols (-p), cipher categories (-s), forward secrecy (-f),
# server preferences (-P), server defaults and the certificate (-S), every
# vulnerability check (-U) and the HTTP headers (-h); not each cipher one by
# one nor client simulations, which add minutes and no severity. No DNS
# lookups (--nodns none): the scan stays on loopback. scripts/peer/peer-testssl.py
# judges testssl's JSON findings: any of severity LOW or above, or a check
# that could not be made (WARN, FATAL), fails, unless its allow-list says
# why it is harmless; it prints the counts, the allowed and the failed
# findings. About 40 s on two cores. Installs testssl.sh with apt when
# missing.
#
#   scripts/peer/peer-testssl.sh            # builds and starts the release binary
#   scripts/peer/peer-testssl.sh HOST:PORT  # any TLS server already listening
#
# The second form shows that the check fails when its subject is weak: an
# openssl s_server that also offers TLS 1.0 and a CBC suite,
#
#   d=$(mktemp -d) && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 -keyout "$d/k" -out "$d/c" -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 2>/dev/null && { openssl s_server -quiet -accept 127.0.0.1:8444 -cert "$d/c" -key "$d/k" -www -serverpref -min_protocol TLSv1 -cipher 'ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES128-SHA:@SECLEVEL=0' & } && sleep 1; scripts/peer/peer-testssl.sh 127.0.0.1:8444; kill %1; rm -r "$d"
#
# exits 1 on that server (TLS 1.0 offered, obsolete CBC ciphers offered).
set -euo pipefail
cd "$(dirname "$0")/../.."
trap 'exit 130' INT TERM
[ $# -le 1 ] || { echo "usage: scripts/peer/peer-testssl.sh [HOST:PORT]" >&2; exit 2; }
started=$(date +%s)

command -v testssl >/dev/null || scripts/apt-install.sh testssl.sh
command -v openssl >/dev/null || scripts/apt-install.sh openssl

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ $# -eq 1 ]; then
    addr=$1
else
    # Valid for a year, so that expiry is no finding; it names the address
    # scanned, so that the host name check passes.
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
        -keyout "$work/key.pem" -out "$work/cert.pem" -subj /CN=localhost \
        -addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>/dev/null
    token=peer-testssl-token
    serve_args=(--tls-cert "$work/cert.pem" --tls-key "$work/key.pem")
    # (serve-release.sh's trap stops the server, then removes the
    # certificate.)
    serve_on_exit='rm -rf "$work"'
    # shellcheck source=scripts/serve-release.sh
    . scripts/serve-release.sh
fi

echo "== testssl against https://$addr"
# testssl's own exit status adds up findings by its own measure, so it is
# not read: a scan that could not run or was cut short writes no JSON, a
# FATAL or WARN finding, or lacks findings peer-testssl.py requires.
status=0
timeout 120 testssl --quiet --color 0 --warnings off --nodns none \
    --connect-timeout 10 --openssl-timeout 10 \
    -p -s -f -P -S -U -h --jsonfile "$work/findings.json" "$addr" \
    >"$work/testssl.txt" 2>&1 || status=$?
if [ "$status" -eq 124 ] || [ ! -s "$work/findings.json" ]; then
    cat "$work/testssl.txt"
    echo "testssl did not finish (exit status $status)" >&2
    exit 1
fi
verdict=0
python3 scripts/peer/peer-testssl.py "$work/findings.json" || verdict=$?
if [ "$verdict" -ne 0 ]; then
    echo "== testssl's report"
    cat "$work/testssl.txt"
fi
echo "peer-testssl: $([ "$verdict" -eq 0 ] && echo passed || echo FAILED) in $(($(date +%s) - started)) s"
exit "$verdict"
