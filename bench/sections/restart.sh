# The restart section of bench/run.sh (`bench/run.sh restart`): restart time
# after a torn tail of 1 MiB behind a journal of 1,000 plants, for each
# crafted tail: 00 00 08 00 repeated, records with wrong checks, a megabyte-
# long name of planted records torn by a kill -9, random bytes. The figures
# the budgets section judges: RESTART_MAX. Sourced by bench/run.sh after
# bench/lib/*.sh, whose helpers it calls.
# shellcheck shell=bash

# tail_bytes KIND FILE: appends a crafted torn tail of 1 MiB to FILE.
tail_bytes() {
  python3 - "$1" "$2" <<'PY'
import os, sys
kind, path = sys.argv[1], sys.argv[2]
mib = 1 << 20
if kind == "zeros0800":
    tail = bytes([0, 0, 8, 0]) * (mib // 4)
elif kind == "wrong-checks":
    # Version-3 records of a put, with checks that are not this file's.
    payload = b"\x01" + (5).to_bytes(8, "little") + (1).to_bytes(4, "little") + b"x" + (0xFFFFFFFF).to_bytes(4, "little")
    record = len(payload).to_bytes(4, "little") + os.urandom(12) + payload
    tail = (record * (mib // len(record) + 1))[:mib]
else:
    tail = os.urandom(mib)
with open(path, "ab") as f:
    f.write(tail)
PY
}

# A megabyte-long name of delete records shaped as version 3 writes them,
# checks made of letters: what a client can send, as JSON.
planted_body() {
  python3 -c '
import json
record = b"\x09\x00\x00\x00" + b"AAAA" + b"BBBBBBBB" + b"\x02" + b"12345678"
name = (record * ((1 << 20) // len(record))).decode()
print(json.dumps({"id": 1000001, "name": name}))'
}

section_restart() {
  echo "## Restart after a torn tail of 1 MiB (behind 1,000 plants)"
  echo
  local journal=$WORK/restart.journal base=$WORK/restart.base kind run ms=()
  local limits=(--max-body 16777216 --max-name 2000000)
  target/release/examples/make_journal "$base" 1000
  echo "| tail | journal bytes | spawn to accepting ms (3 runs) | torn bytes cut |"
  echo "|---|---|---|---|"
  for kind in none zeros0800 wrong-checks planted-name random; do
    ms=()
    for run in 1 2 3; do
      cp "$base" "$journal"
      case $kind in
        none) ;;
        planted-name)
          start_server --data "$journal" "${limits[@]}"
          planted_body >"$WORK/planted.json"
          curl -sf -o /dev/null -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
            --data-binary @"$WORK/planted.json" "http://$ADDR/plants"
          kill -9 "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=
          truncate -s -100 "$journal" ;;
        *) tail_bytes "$kind" "$journal" ;;
      esac
      local bytes
      bytes=$(stat -c %s "$journal")
      LOG_LEVEL=info start_server --data "$journal" "${limits[@]}"
      ms+=("$STARTUP_MS")
      stop_server
    done
    local cut
    cut=$(grep -o 'cut off a torn final record ([0-9]* bytes)' "$WORK/server.log" | grep -o '[0-9]*' || echo 0)
    echo "| $kind | $bytes | ${ms[*]} | $cut |"
    local slowest
    slowest=$(printf '%s\n' "${ms[@]}" | sort -n | tail -1)
    [ "$kind" = none ] || [ "$slowest" -le "${RESTART_MAX:-0}" ] || RESTART_MAX=$slowest
  done
  echo
}
