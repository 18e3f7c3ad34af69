#!/usr/bin/env bash
# Debian's slowhttptest against the release binary on loopback: slow
# headers (-H, slowloris), slow body (-B) and slow read (-X), 200
# connections each, run at once for 15 s, against a server started with
# --max-connections 768 (the 600 slow connections stay under it: a refusal
# past the limit is the limit working, not the server giving way) and its
# default timeouts. Meanwhile 100 GET /healthz, each from a new curl (a new
# connection), must all answer 200 within 1 s. Fails on any other answer,
# on slowhttptest finding the service unavailable (its probe, a GET every
# 3 s, unanswered within 2 to 3 s: a 0 in the "Service Available" column
# of its CSV), and on an attack that never held half its connections at
# once (it would prove nothing). About 20 s. Installs slowhttptest and curl
# with apt when missing.
#
#   scripts/peer/peer-slowhttp.sh            # builds and starts the release binary
#   scripts/peer/peer-slowhttp.sh HOST:PORT  # any HTTP server already listening
#
# The second form shows that the check fails on a server that slow clients
# starve: Python's single-threaded HTTPServer (python3 -m http.server is
# threaded since Python 3.7), with a healthz file to answer 200,
#
#   d=$(mktemp -d) && echo ok >"$d/healthz" && { python3 -c 'import functools, http.server as h, sys; h.HTTPServer(("127.0.0.1", 8098), functools.partial(h.SimpleHTTPRequestHandler, directory=sys.argv[1])).serve_forever()' "$d" 2>/dev/null & } && sleep 1; scripts/peer/peer-slowhttp.sh 127.0.0.1:8098; kill %1; rm -r "$d"
#
# exits 1 there (/healthz times out, slowhttptest's probe goes unanswered).
set -euo pipefail
cd "$(dirname "$0")/../.."
trap 'exit 130' INT TERM
[ $# -le 1 ] || { echo "usage: scripts/peer/peer-slowhttp.sh [HOST:PORT]" >&2; exit 2; }
started=$(date +%s)

command -v slowhttptest >/dev/null || scripts/apt-install.sh slowhttptest
command -v curl >/dev/null || scripts/apt-install.sh curl

connections=200
seconds=15
token=peer-slowhttp-token
work=$(mktemp -d)
attackers=()
# shellcheck disable=SC2317 # run by the EXIT trap
stop_attackers() {
    for pid in ${attackers[@]+"${attackers[@]}"}; do kill "$pid" 2>/dev/null || true; done
    for pid in ${attackers[@]+"${attackers[@]}"}; do wait "$pid" 2>/dev/null || true; done
}
trap 'stop_attackers; rm -rf "$work"' EXIT
if [ $# -eq 1 ]; then
    addr=$1
else
    serve_args=(--max-connections 768)
    # (serve-release.sh's trap stops the server, then the attackers.)
    serve_on_exit='stop_attackers; rm -rf "$work"'
    # shellcheck source=scripts/serve-release.sh
    . scripts/serve-release.sh
fi

# One GET /healthz on a new connection: "STATUS SECONDS" (000 when curl
# got no answer within 1 s).
healthz() {
    curl -s -o /dev/null --max-time 1 -w '%{http_code} %{time_total}\n' \
        "http://$addr/healthz" || true
}
first=$(healthz)
[ "${first%% *}" = 200 ] || { echo "http://$addr/healthz answers '$first' before any attack" >&2; exit 1; }

# attack MODE NAME PATH [ARGS...]: one slowhttptest in the background, its
# CSV in $work/NAME.csv. A follow-up every 2 s (-i 2) keeps a slow body
# within the server's 10 s of allowed silence, so that it lasts the whole
# run (a slow head is closed at --head-timeout, 10 s, whatever it sends);
# -p 3: the probe's timeout.
attack() {
    local mode=$1 name=$2 path=$3
    shift 3
    timeout $((seconds + 30)) slowhttptest "$mode" -c "$connections" -r 200 -l "$seconds" \
        -i 2 -p 3 -g -o "$work/$name" -u "http://$addr$path" "$@" >"$work/$name.log" 2>&1 &
    attackers+=($!)
}
echo "== slowhttptest -H, -B and -X against http://$addr, $connections connections each, ${seconds} s"
attack -H headers /
# An unauthenticated POST is answered 401 before its body is read, so the
# slow body carries the token: slowhttptest has no option for a header, and
# the value of -j (its Cookie header) goes into the request as it is given.
attack -B body /plants -f application/json -s 8192 -j $'peer=slowhttp\r\nAuthorization: Bearer '"$token"
# A response of 23 KB asked for 10 times on each connection (-k 10), read
# 5 bytes a second through a receive window of at most 64 bytes.
attack -X read /openapi.json -k 10 -w 1 -y 64 -n 1 -z 5

sleep 2 # the attackers open their connections (200 a second each)
for _ in $(seq 100); do
    healthz >>"$work/healthz.txt"
    sleep 0.1
done
for pid in "${attackers[@]}"; do wait "$pid" || true; done
attackers=()

failed=0
# healthz: STATUS SECONDS a line.
read -r ok worst < <(awk '$1 == 200 && $2 < 1 { ok++ } $2 > worst { worst = $2 }
    END { print ok + 0, worst + 0 }' "$work/healthz.txt")
echo "GET /healthz x100 during the attacks: $ok answered 200 within 1 s, slowest ${worst} s"
if [ "$ok" -ne 100 ]; then
    failed=1
    awk '!($1 == 200 && $2 < 1) { n[$1]++ } END { for (s in n) print "  FAILED: " n[s] " answered " \
        (s == "000" ? "nothing within 1 s" : s == 200 ? "200 in 1 s or more" : "status " s) }' "$work/healthz.txt"
fi
for name in headers body read; do
    # Seconds,Closed,Pending,Connected,Service Available (0: unavailable).
    # Connected is slowhttptest's view: a connection the server closed with
    # output still on its way stays connected until the client has read it.
    read -r rows peak down < <(awk -F, 'NR > 1 { rows++; if ($4 > peak) peak = $4; if ($5 == 0) down++ }
        END { print rows + 0, peak + 0, down + 0 }' "$work/$name.csv" 2>/dev/null || echo "0 0 0")
    ending=$(sed 's/\x1b\[[0-9;]*[A-Za-z]//g' "$work/$name.log" | grep -o 'Exit status: .*' | tail -1 || true)
    echo "slow $name: at most $peak connections open at once, service unavailable in $down of $rows seconds; ${ending:-no exit status}"
    if [ "$down" -ne 0 ]; then
        failed=1
        echo "  FAILED: slowhttptest's probe went unanswered"
    fi
    if [ "$peak" -lt $((connections / 2)) ]; then
        failed=1
        echo "  FAILED: the attack never held half its $connections connections"
    fi
done
echo "peer-slowhttp: $([ "$failed" -eq 0 ] && echo passed || echo FAILED) in $(($(date +%s) - started)) s"
exit "$failed"
