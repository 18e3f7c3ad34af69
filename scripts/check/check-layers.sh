#!/usr/bin/env bash
# The entry CI calls: the architecture check is scripts/check/check-layers.py
# (its --help says what it enforces); this wrapper keeps the old name. With
# no arguments it then shows the check failing, so that a check that cannot
# fail does not pass CI (four more runs on copies, a few seconds; builds
# nothing):
#
# 1. a type name declared in two modules (the door's `Plants`, planted in a
#    copy of src/ in `percent` too) fails, named with both modules (that a
#    row of ARCHITECTURE.md's table of shared type names lets one pass,
#    the run above shows);
# 2. a row for it in a copy of that table, against src/ as it is, fails
#    as a row no duplicate uses;
# 3. a feature named in a file that is no seam of it (webhook/mod.rs, in a
#    copy of the tree: src/ copied, the rest linked) fails, the file and
#    line named;
# 4. an allowed file naming one line more than the allow list gives it
#    (percent.rs) fails too, saying how many it is given.
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

# 1. and 2.
mkdir "$tmp/names"
cp -r src "$tmp/names/src"
printf '\n/// Planted by scripts/check/check-layers.sh.\npub struct Plants;\n' >>"$tmp/names/src/percent.rs"
awk '{ print } /^\| type name \|/ { table = 1 }
  table && /^\|---/ { print "| `Plants` | `percent`, `plants` | planted |"; table = 0 }' \
  ARCHITECTURE.md >"$tmp/names/ARCHITECTURE.md"
rc=0
python3 $CHECK --src "$tmp/names/src" >/dev/null 2>"$tmp/out" || rc=$?
[ "$rc" = 1 ] || fail "a type name declared in two modules: the check exited $rc, not 1"
grep -q '^type name `Plants` declared in 2 modules (percent, plants)' "$tmp/out" ||
  fail "a type name declared in two modules was not named: $(cat "$tmp/out")"
rc=0
python3 $CHECK --doc "$tmp/names/ARCHITECTURE.md" >/dev/null 2>"$tmp/out" || rc=$?
[ "$rc" = 1 ] && grep -q 'lists `Plants`, which no two modules declare' "$tmp/out" ||
  fail "a row of the shared type names no duplicate uses: exit $rc, $(cat "$tmp/out")"
echo "check-layers: fails on a type name declared in two modules and on an unused row" >&2

# 3. and 4.: `seam_case FILE`: src/ copied afresh into a copy of the tree,
# FILE given one more line naming a feature; the check must exit 1, its
# words in $tmp/out.
copy="$tmp/seams"
mkdir "$copy"
for entry in $(ls -A); do
  [ "$entry" = src ] || [ "$entry" = target ] || ln -s "$PWD/$entry" "$copy/$entry"
done
seam_case() {
  rm -rf "$copy/src"
  cp -R src "$copy/src"
  printf '\n#[cfg(feature = "tls")]\nconst _: () = ();\n' >>"$copy/src/$1"
  rc=0
  LAYERS_ROOT="$copy" python3 $CHECK >/dev/null 2>"$tmp/out" || rc=$?
  [ "$rc" = 1 ] || fail "a feature named in src/$1: the check exited $rc, not 1"
}
line=$(($(wc -l <src/webhook/mod.rs) + 2))
seam_case webhook/mod.rs
grep -qF "src/webhook/mod.rs:$line: #[cfg(feature = \"tls\")] (tls)" "$tmp/out" ||
  fail "a feature named in src/webhook/mod.rs: the check did not name the line: $(cat "$tmp/out")"
seam_case percent.rs
grep -qF "(the allow list gives it 1)" "$tmp/out" ||
  fail "src/percent.rs past its allowed line: the check did not say so: $(cat "$tmp/out")"
echo "check-layers: fails on a feature named outside its seams, and past the allow list" >&2
