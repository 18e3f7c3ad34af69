#!/usr/bin/env bash
# The published x86_64 builds held to their size budgets
# (bench/size-budgets.txt) by scripts/check/check-sizes.py, then the check
# itself tested on the same builds, so that a check that cannot fail does
# not pass CI (a second or two; builds nothing):
#
# 1. each build within its budget (the check's table is printed);
# 2. each build again with its budget lowered to one byte under it: the
#    check must fail (exit 1) and name it; with its budget at exactly its
#    size it must pass; a missing build must fail too (exit 2);
# 3. README.md states each budget the file gives words for, in those words.
#
#   scripts/check/check-sizes.sh [KEY=FILE...]
#
# Without arguments, the builds CI makes: the plain build
# (FEATURES=plain scripts/release/release-build.sh x86_64-unknown-linux-gnu,
# in target/plain), the static default build ($RELEASE_DIR, as for
# scripts/release/release-build.sh, /x86_64-unknown-linux-musl) and the
# amd64 package (scripts/release/package-deb.sh, in target/debian).
set -euo pipefail
cd "$(dirname "$0")/../.."

FILES=("$@")
if [ ${#FILES[@]} -eq 0 ]; then
  base=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
  FILES=(
    size.x86_64-unknown-linux-gnu.plain=target/plain/x86_64-unknown-linux-gnu/release/plantstore
    size.x86_64-unknown-linux-musl="${RELEASE_DIR:-target}/x86_64-unknown-linux-musl/release/plantstore"
    deb.amd64="target/debian/plantstore_${base}-1_amd64.deb"
  )
fi
CHECK=scripts/check/check-sizes.py

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# 1. The builds as they are.
python3 $CHECK "${FILES[@]}" || fail "a build is over its size budget (bench/size-budgets.txt)"

# 2. The check fails over a budget and passes at it, for each build.
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for file in "${FILES[@]}"; do
  key=${file%%=*}
  size=$(stat -c %s "${file#*=}")
  rc=0
  python3 $CHECK --budget "$key=$((size - 1))" "${FILES[@]}" >/dev/null 2>"$out" || rc=$?
  [ "$rc" = 1 ] || fail "with $key's budget at $((size - 1)) bytes the check exited $rc, not 1"
  grep -qx "check-sizes: $key is over its budget" "$out" ||
    fail "with $key's budget lowered the check did not name it: $(cat "$out")"
  python3 $CHECK --budget "$key=$size" "${FILES[@]}" >/dev/null ||
    fail "with $key's budget at exactly its $size bytes the check failed"
done
rc=0
python3 $CHECK "${FILES[0]%%=*}=target/no-such-build" >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "a missing build: the check exited $rc, not 2"
echo "check-sizes: fails one byte over each budget, passes at it" >&2

# 3. README.md's statements follow the file (its lines joined: a budget's
# words may be wrapped).
readme=$(tr -s '\n ' '  ' <README.md)
while read -r key words; do
  [[ $readme == *"$words"* ]] || fail "README.md does not state $key's budget as $words"
done < <(python3 $CHECK --stated)
echo "check-sizes: README.md states every budget as bench/size-budgets.txt does" >&2
