#!/usr/bin/env bash
# The entry CI calls: the architecture check is scripts/check/check-layers.py
# (its --help says what it enforces); this wrapper keeps the old name. With
# no arguments it then shows the check failing, so that a check that cannot
# fail does not pass CI (two more runs, a few seconds; builds nothing):
#
# 1. a type name declared in two modules (the door's `Plants`, planted in a
#    copy of src/ in `percent` too) fails, named with both modules (that a
#    row of ARCHITECTURE.md's table of shared type names lets one pass,
#    the run above shows);
# 2. a row for it in a copy of that table, against src/ as it is, fails
#    as a row no duplicate uses.
set -euo pipefail
cd "$(dirname "$0")/../.."
CHECK=scripts/check/check-layers.py
python3 $CHECK "$@"
[ $# -eq 0 ] || exit 0

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r src "$tmp/src"
printf '\n/// Planted by scripts/check/check-layers.sh.\npub struct Plants;\n' >>"$tmp/src/percent.rs"
awk '{ print } /^\| type name \|/ { table = 1 }
  table && /^\|---/ { print "| `Plants` | `percent`, `plants` | planted |"; table = 0 }' \
  ARCHITECTURE.md >"$tmp/ARCHITECTURE.md"

# 1.
rc=0
python3 $CHECK --src "$tmp/src" >/dev/null 2>"$tmp/out" || rc=$?
[ "$rc" = 1 ] || fail "a type name declared in two modules: the check exited $rc, not 1"
grep -q '^type name `Plants` declared in 2 modules (percent, plants)' "$tmp/out" ||
  fail "a type name declared in two modules was not named: $(cat "$tmp/out")"
# 2.
rc=0
python3 $CHECK --doc "$tmp/ARCHITECTURE.md" >/dev/null 2>"$tmp/out" || rc=$?
[ "$rc" = 1 ] && grep -q 'lists `Plants`, which no two modules declare' "$tmp/out" ||
  fail "a row of the shared type names no duplicate uses: exit $rc, $(cat "$tmp/out")"
echo "check-layers: fails on a type name declared in two modules and on an unused row" >&2
