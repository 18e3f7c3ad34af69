#!/usr/bin/env bash
# Checks contrib/plantstore.service and contrib/plantstore-postgres.service
# with `systemd-analyze verify` (from Debian's systemd package, installed
# if missing). Any output from verify is a failure. Then each unit's
# LimitNOFILE must let the default --max-connections be served: the
# release build, started under that limit (prlimit), must not warn that
# the limit lowers the connection cap.
set -euo pipefail
cd "$(dirname "$0")/../.."

SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
if ! command -v systemd-analyze >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends systemd >/dev/null
fi
# SERVE_BIN: a default build made already, used instead of building one.
bin=${SERVE_BIN:-target/release/plantstore}
[ -n "${SERVE_BIN:-}" ] || cargo build --release --quiet --bin plantstore
bin=$(realpath "$bin")
# verify wants each ExecStart binary to exist: the release build is linked
# at each unit's path where nothing is (the check is about the units, not
# the build), and the links removed after.
linked=()
trap '[ ${#linked[@]} -eq 0 ] || $SUDO rm -f "${linked[@]}"' EXIT
for path in $(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' contrib/plantstore.service contrib/plantstore-postgres.service); do
  if [ ! -e "$path" ]; then
    $SUDO ln -s "$bin" "$path"
    linked+=("$path")
  fi
done
# --man=no: the man page the unit names is the package's (scripts/release/check-deb.sh
# verifies the unit installed beside it).
out=$(systemd-analyze verify --man=no contrib/plantstore.service contrib/plantstore-postgres.service 2>&1) &&
  rc=0 || rc=$?
[ ${#linked[@]} -eq 0 ] || $SUDO rm -f "${linked[@]}"
linked=()
if [ "$rc" -ne 0 ] || [ -n "$out" ]; then
  echo "systemd-analyze verify: exit $rc" >&2
  echo "$out" >&2
  exit 1
fi
echo "contrib/plantstore.service, contrib/plantstore-postgres.service: systemd-analyze verify clean"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
for unit in contrib/plantstore.service contrib/plantstore-postgres.service; do
  limit=$(sed -n 's/^LimitNOFILE=//p' "$unit")
  [ -n "$limit" ] || { echo "$unit: no LimitNOFILE" >&2; exit 1; }
  PLANTSTORE_TOKEN=check prlimit --nofile="$limit:$limit" "$bin" \
    --addr 127.0.0.1:0 2>"$log" &
  pid=$!
  for _ in $(seq 1 200); do grep -q listening "$log" && break; sleep 0.05; done
  kill "$pid" && wait "$pid" || true
  grep -q listening "$log" || { echo "$unit: the server did not start:" >&2; cat "$log" >&2; exit 1; }
  if grep -q "open-file limit" "$log"; then
    echo "$unit: LimitNOFILE=$limit is below the default --max-connections:" >&2
    cat "$log" >&2
    exit 1
  fi
  echo "$unit: LimitNOFILE=$limit serves the default --max-connections"
done
