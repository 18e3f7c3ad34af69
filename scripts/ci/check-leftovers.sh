#!/usr/bin/env bash
# Fails when a test left a process behind: a plantstore, nginx, PostgreSQL,
# pgbouncer, wrk, ab, slowhttptest, Chromium, chromedriver, qemu or container (conmon)
# process that was not running when the snapshot was taken. CI takes the
# snapshot first and checks after the steps that start such processes.
#
#   scripts/ci/check-leftovers.sh snapshot FILE   what runs now, into FILE
#   scripts/ci/check-leftovers.sh check FILE      fail if anything new still
#                                              runs (after 5 s of grace for
#                                              processes on their way out)
set -euo pipefail
# Whole command names (the kernel's, at most 15 characters).
PATTERN='^(plantstore|nginx|postgres|postmaster|pgbouncer|wrk|ab|slowhttptest|chromium|chromedriver|qemu-.*|conmon)$'
running() { { pgrep "$PATTERN" 2>/dev/null || true; } | sort; }
[ $# -eq 2 ] || { echo "usage: $0 snapshot|check FILE" >&2; exit 2; }
case $1 in
  snapshot) running >"$2" ;;
  check)
    for _ in $(seq 1 50); do
      new=$(comm -13 "$2" <(running) | tr '\n' ' ')
      [ -n "${new// /}" ] || exit 0
      sleep 0.1
    done
    echo "processes left behind by the tests:" >&2
    for pid in $new; do ps -o pid=,ppid=,args= -p "$pid" >&2 || true; done
    exit 1 ;;
  *) echo "usage: $0 snapshot|check FILE" >&2; exit 2 ;;
esac
