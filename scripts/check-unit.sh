#!/usr/bin/env bash
# Checks contrib/plantstore.service with `systemd-analyze verify` (from
# Debian's systemd package, installed if missing). verify wants the
# ExecStart binary to exist, so the release build is linked at
# /usr/local/bin/plantstore for the check when nothing is there (and the
# link removed after). Any output from verify is a failure.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
if ! command -v systemd-analyze >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends systemd >/dev/null
fi
cargo build --release --quiet --bin plantstore
linked=
if [ ! -e /usr/local/bin/plantstore ]; then
  $SUDO ln -s "$PWD/target/release/plantstore" /usr/local/bin/plantstore
  linked=yes
fi
out=$(systemd-analyze verify contrib/plantstore.service 2>&1) && rc=0 || rc=$?
[ -n "$linked" ] && $SUDO rm -f /usr/local/bin/plantstore
if [ "$rc" -ne 0 ] || [ -n "$out" ]; then
  echo "systemd-analyze verify: exit $rc" >&2
  echo "$out" >&2
  exit 1
fi
echo "contrib/plantstore.service: systemd-analyze verify clean"
