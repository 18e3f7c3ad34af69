#!/usr/bin/env bash
# The entry CI calls: the architecture check is scripts/check/check-layers.py
# (its --help says what it enforces); this wrapper keeps the old name. With
# no arguments it then shows the check failing, so that a check that cannot
# fail does not pass CI: two more runs, each on a copy of the tree (src/ and
# ARCHITECTURE.md copied, the rest linked; a few seconds, nothing built),
# each of which must exit 1 naming both of its plants:
#
# 1. a type name declared in two modules (the door's `Plants`, planted in
#    `percent` too; that a row of ARCHITECTURE.md's table of shared type
#    names lets one pass, the run above shows), and a feature named in a
#    file that is no seam of it (webhook/mod.rs), with its file and line;
# 2. a row of the shared type names that no duplicate uses, and an allowed
#    file naming one line more than the allow list gives it (percent.rs).
#
#   scripts/check/check-layers.sh [--files]
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
copy="$tmp/tree"
mkdir "$copy"
for entry in $(ls -A); do
  case "$entry" in
    src | target | ARCHITECTURE.md) ;;
    *) ln -s "$PWD/$entry" "$copy/$entry" ;;
  esac
done
# `planted`: the check run on the copy (expected to exit 1), its words in
# $tmp/out.
planted() {
  rc=0
  LAYERS_ROOT="$copy" python3 $CHECK >/dev/null 2>"$tmp/out" || rc=$?
  [ "$rc" = 1 ] || fail "$1: the check exited $rc, not 1"
}
fresh() {
  rm -rf "$copy/src"
  cp -R src "$copy/src"
  cp ARCHITECTURE.md "$copy/ARCHITECTURE.md"
}
feature='\n#[cfg(feature = "tls")]\nconst _: () = ();\n'

# 1.
fresh
printf '\n/// Planted by scripts/check/check-layers.sh.\npub struct Plants;\n' >>"$copy/src/percent.rs"
line=$(($(wc -l <src/webhook/mod.rs) + 2))
printf "$feature" >>"$copy/src/webhook/mod.rs"
planted "a type name in two modules, a feature outside its seams"
grep -q '^type name `Plants` declared in 2 modules (percent, plants)' "$tmp/out" ||
  fail "a type name declared in two modules was not named: $(cat "$tmp/out")"
grep -qF "src/webhook/mod.rs:$line: #[cfg(feature = \"tls\")] (tls)" "$tmp/out" ||
  fail "a feature named in src/webhook/mod.rs: the check did not name the line: $(cat "$tmp/out")"

# 2.
fresh
awk '{ print } /^\| type name \|/ { table = 1 }
  table && /^\|---/ { print "| `Plants` | `percent`, `plants` | planted |"; table = 0 }' \
  ARCHITECTURE.md >"$copy/ARCHITECTURE.md"
printf "$feature" >>"$copy/src/percent.rs"
planted "an unused row, a file past the allow list"
grep -q 'lists `Plants`, which no two modules declare' "$tmp/out" ||
  fail "a row of the shared type names no duplicate uses: $(cat "$tmp/out")"
grep -qF "(the allow list gives it 1)" "$tmp/out" ||
  fail "src/percent.rs past its allowed line: the check did not say so: $(cat "$tmp/out")"
echo "check-layers: fails on a type name declared in two modules, an unused row, a feature" \
  "named outside its seams, and a file past the allow list" >&2
