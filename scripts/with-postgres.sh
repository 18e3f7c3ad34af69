#!/usr/bin/env bash
# Runs CMD (`scripts/with-postgres.sh CMD...`) next to a throwaway
# PostgreSQL cluster of its own, and exits with CMD's status.
#
# Installs Debian's postgresql with apt when no initdb is found under
# /usr/lib/postgresql (the package's own cluster is not started: a
# policy-rc.d is in place for the install) and fails if it cannot. Our
# cluster lives in a fresh `mktemp -d` directory, owned by the `postgres`
# system user when run as root (PostgreSQL refuses to run as root), by the
# current user otherwise. It listens on 127.0.0.1 only, on a free port, its
# unix socket in that directory; fsync stays on. Superuser `plantstore`
# with a random password, scram-sha-256 for every connection. The cluster
# is stopped and its directory removed on exit, whatever the exit.
#
# CMD sees:
#   PLANTSTORE_TEST_DATABASE  postgres://plantstore:PASSWORD@127.0.0.1:PORT/postgres
#                             (PASSWORD is 32 hex digits)
#   PLANTSTORE_TEST_PG_STOP   a command line for `sh -c` that stops the
#                             cluster (fast shutdown) and returns once it is down
#   PLANTSTORE_TEST_PG_CRASH  one that stops it as a crash would (immediate
#                             shutdown: no checkpoint, recovery at the next start)
#   PLANTSTORE_TEST_PG_START  one that starts it again on the same port and
#                             returns once it accepts connections
#   PLANTSTORE_TEST_PG_CA     the CA certificate (PEM) of the cluster's TLS
#                             certificate, which names 127.0.0.1 only
#   PATH                      with the PostgreSQL bin directory appended
# The two command lines work whether they are run by root or by the user
# that owns the cluster.
set -euo pipefail

[ "$#" -gt 0 ] || { echo "usage: $0 CMD..." >&2; exit 2; }

newest_bin() {
    local initdb
    initdb=$(printf '%s\n' /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n 1)
    [ -x "$initdb" ] && dirname "$initdb"
}

if ! newest_bin >/dev/null; then
    "$(dirname "$0")/apt-install.sh" postgresql
fi
bin=$(newest_bin) || { echo "with-postgres: no initdb under /usr/lib/postgresql" >&2; exit 1; }

# As root, the cluster's commands run as `postgres`, from / (the caller's
# directory may be closed to that user).
if [ "$(id -u)" -eq 0 ]; then
    owner=postgres
    id -u "$owner" >/dev/null 2>&1 || { echo "with-postgres: no $owner user to run the cluster" >&2; exit 1; }
    as_owner() { (cd / && runuser -u "$owner" -- "$@"); }
else
    owner=$(id -un)
    as_owner() { "$@"; }
fi

dir=$(mktemp -d)
data=$dir/data
log=$dir/postgres.log
# shellcheck disable=SC2317 # run by the EXIT trap
stop() {
    if [ -f "$data/postmaster.pid" ]; then
        as_owner "$bin/pg_ctl" -D "$data" -m immediate -w -t 30 -s stop >/dev/null 2>&1 || {
            # pg_ctl could not do it: the postmaster's pid is the file's first line.
            pid=$(head -n 1 "$data/postmaster.pid" 2>/dev/null || true)
            [ -z "$pid" ] || kill -KILL "$pid" 2>/dev/null || true
        }
    fi
    rm -rf "$dir"
}
trap stop EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

password=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s\n' "$password" >"$dir/password"
[ "$owner" = "$(id -un)" ] || chown -R "$owner:" "$dir"
as_owner "$bin/initdb" -D "$data" -U plantstore --pwfile="$dir/password" \
    --auth=scram-sha-256 --encoding=UTF8 --no-locale --no-sync >"$dir/initdb.log" 2>&1 || {
    echo "with-postgres: initdb failed:" >&2; cat "$dir/initdb.log" >&2; exit 1
}
rm -f "$dir/password"
# The port is in a file of its own so a retry can change it; everything
# else is fixed. Tests start many servers, each with a pool.
cat >>"$data/postgresql.conf" <<EOF

# with-postgres.sh
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
max_connections = 200
include 'port.conf'
ssl = on
EOF
# TLS, as a database reached over a network has it: a test CA (its
# certificate in PLANTSTORE_TEST_PG_CA) and a server certificate for
# 127.0.0.1 only, not "localhost", so that a client asking for
# verify-full by that name is refused. Clients choose with sslmode
# (the default, prefer, takes TLS without verifying).
tls=$dir/tls
mkdir -p "$tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -keyout "$tls/ca.key" -out "$tls/ca.pem" -subj "/CN=with-postgres test CA" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$data/server.key" \
    -out "$tls/server.csr" -subj /CN=127.0.0.1 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >"$tls/ext"
openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -set_serial 1 \
    -days 2 -extfile "$tls/ext" -out "$data/server.crt" 2>/dev/null
chmod 600 "$data/server.key"
[ "$owner" = "$(id -un)" ] || chown "$owner:" "$data/server.key" "$data/server.crt"
chmod 755 "$tls" && chmod 644 "$tls/ca.pem"
export PLANTSTORE_TEST_PG_CA=$tls/ca.pem

# A port below Linux's ephemeral range (32768 and up), so that it does not
# meet the port-0 listeners the tests start; nothing may listen there yet.
# Another process can still take it first: then a start fails on the bind
# and the next port is tried.
free_port() {
    local port
    while :; do
        port=$((20000 + RANDOM % 12000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return
        fi
    done
}

pg_start=("$bin/pg_ctl" -D "$data" -l "$log" -w -t 30 -s start)
started=
for _ in 1 2 3 4 5; do
    port=$(free_port)
    echo "port = $port" | as_owner tee "$data/port.conf" >/dev/null
    if as_owner "${pg_start[@]}" >"$dir/pg_ctl.out" 2>&1; then
        started=1
        break
    fi
    grep -qs 'could not bind' "$log" || break
    : >"$log"
done
[ -n "$started" ] || {
    echo "with-postgres: PostgreSQL did not start; pg_ctl and the end of the server's log:" >&2
    cat "$dir/pg_ctl.out" >&2
    tail -n 30 "$log" >&2 2>/dev/null || true
    exit 1
}
# pg_ctl -w waits for the postmaster to say it is ready; this checks that a
# TCP client gets in as well, within 30 seconds.
ready=
for _ in $(seq 300); do
    if "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -d postgres; then ready=1; break; fi
    sleep 0.1
done
[ -n "$ready" ] || {
    echo "with-postgres: PostgreSQL does not accept connections on 127.0.0.1:$port; the end of its log:" >&2
    tail -n 30 "$log" >&2
    exit 1
}

# The same pg_ctl calls as a command line for `sh -c`: through runuser when
# run by root (and the cluster's owner is not root), as is otherwise.
for_sh() {
    local line
    line=$(printf '%q ' "$@")
    # shellcheck disable=SC2016 # $(id -u) is for the sh that runs the line
    printf 'cd / && if [ "$(id -u)" -eq 0 ]; then exec runuser -u %q -- %s; else exec %s; fi' \
        "$owner" "$line" "$line"
}
export PLANTSTORE_TEST_DATABASE="postgres://plantstore:$password@127.0.0.1:$port/postgres"
PLANTSTORE_TEST_PG_STOP=$(for_sh "$bin/pg_ctl" -D "$data" -m fast -w -t 30 -s stop)
PLANTSTORE_TEST_PG_CRASH=$(for_sh "$bin/pg_ctl" -D "$data" -m immediate -w -t 30 -s stop)
PLANTSTORE_TEST_PG_START=$(for_sh "${pg_start[@]}")
export PLANTSTORE_TEST_PG_STOP PLANTSTORE_TEST_PG_CRASH PLANTSTORE_TEST_PG_START
export PATH="$PATH:$bin"

status=0
"$@" || status=$?
exit "$status"
