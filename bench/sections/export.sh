# The export section of bench/run.sh (`bench/run.sh export`): GET /export of
# $PLANTS plants (a --data journal), $ROUNDS rounds: time, plants/s, MB/s,
# RSS before and at peak (polled); RSS with 20 clients that ask for it and
# never read; then the export as the --seed of a new server: its start-up
# time, RSS, and whether its export is the same. Sourced by bench/run.sh
# after bench/lib/*.sh, whose helpers it calls.
# shellcheck shell=bash

section_export() {
  echo "## GET /export of $PLANTS plants"
  echo
  local journal=$WORK/export.journal out=$WORK/export.ndjson
  target/release/examples/make_journal "$journal" "$PLANTS"
  start_server --data "$journal"
  local before run started ns peak bytes
  before=$(rss_kib)
  echo "| run | seconds | plants/s | MB/s | RSS before KiB | peak RSS during KiB |"
  echo "|---|---|---|---|---|---|"
  for run in $(seq 1 "$ROUNDS"); do
    started=$(date +%s%N)
    curl -sf -H "Authorization: Bearer $TOKEN" "http://$ADDR/export" -o "$out" &
    peak=$(peak_rss_while $!)
    wait $! || { echo "export failed" >&2; exit 1; }
    ns=$(($(date +%s%N) - started))
    bytes=$(stat -c %s "$out")
    [ "$(wc -l <"$out")" -eq "$PLANTS" ] || { echo "export lost plants" >&2; exit 1; }
    echo "| $run | $(awk "BEGIN{printf \"%.3f\", $ns/1e9}") |" \
      "$(awk "BEGIN{printf \"%.0f\", $PLANTS/($ns/1e9)}") |" \
      "$(awk "BEGIN{printf \"%.0f\", $bytes/1e6/($ns/1e9)}") | $before | $peak |"
  done
  echo
  # Twenty clients ask and never read: each holds what its socket buffers
  # take plus one piece.
  python3 - "$PORT" "$TOKEN" <<'PY' &
import socket, sys, time
port, token = int(sys.argv[1]), sys.argv[2]
held = []
for _ in range(20):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(f"GET /export HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    held.append(s)
time.sleep(3)
PY
  local stalled=$!
  sleep 2
  echo "20 clients asking for the export and not reading: RSS $(rss_kib) KiB" \
    "(idle with the plants: $before KiB; export size $(stat -c %s "$out") bytes)."
  wait "$stalled" || true
  stop_server
  # The export is a valid --seed file: a new server starts from it.
  start_server --seed "$out"
  echo "A new server with --seed of that export: accepting after $STARTUP_MS ms, RSS $(rss_kib) KiB."
  curl -sf -H "Authorization: Bearer $TOKEN" "http://$ADDR/export" -o "$WORK/again.ndjson"
  if cmp -s "$out" "$WORK/again.ndjson"; then
    echo "Its export is byte for byte the same."
  else
    echo "Its export differs." >&2
    exit 1
  fi
  stop_server
  echo
}
