# The compaction section of bench/run.sh (`bench/run.sh compaction`): a
# journal of $PLANTS plants, each written 3 times (so past twice its live
# size), compacted by the server after one change, $ROUNDS rounds: its
# longest store lock hold (from its log), time, RSS before, at peak and
# after. The figures the budgets section judges: COMPACT_HOLDS and
# COMPACT_PEAK_GROWTH. Sourced by bench/run.sh after bench/lib/*.sh, whose
# helpers it calls.
# shellcheck shell=bash

# compact_once JOURNAL: starts the server on JOURNAL (past twice its live
# size), makes one change so that it compacts, waits for its log line and
# stops it; sets COMPACT_BYTES, COMPACT_MS and COMPACT_HOLD_US (from that
# line), RSS_BEFORE, RSS_PEAK (while compacting) and RSS_AFTER, in KiB.
compact_once() {
  local line sampled=0 rss waited=0 hwm=yes
  # Info level for the compaction's log line (and the access line of the
  # one request below).
  LOG_LEVEL=info start_server --data "$1"
  sleep 0.5
  RSS_BEFORE=$(rss_kib)
  # Reset the peak (start-up read the whole file into memory); where that
  # is refused, the peak is the largest of the samples taken below.
  { echo 5 >"/proc/$SERVER_PID/clear_refs"; } 2>/dev/null || hwm=
  # Any change checks the journal's size: this one starts the compaction.
  curl -sf -o /dev/null -X PUT -H "Authorization: Bearer $TOKEN" \
    -H 'Content-Type: application/json' -d '{"name":"plant 1"}' "http://$ADDR/plants/1"
  until line=$(grep -m1 'journal compacted to' "$WORK/server.log"); do
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log" >&2; exit 1; }
    rss=$(rss_kib)
    [ "$rss" -le "$sampled" ] || sampled=$rss
    waited=$((waited + 1))
    [ "$waited" -lt 6000 ] || { echo "no compaction logged in 120 s" >&2; exit 1; }
    sleep 0.02
  done
  RSS_PEAK=$sampled
  if [ -n "$hwm" ]; then
    rss=$(peak_rss_kib)
    [ "$rss" -le "$RSS_PEAK" ] || RSS_PEAK=$rss
  fi
  RSS_AFTER=$(rss_kib)
  stop_server
  # "journal compacted to N bytes in M ms (longest store lock hold K µs)"
  read -r COMPACT_BYTES COMPACT_MS COMPACT_HOLD_US <<<"$(sed -n \
    's/.*compacted to \([0-9]*\) bytes in \([0-9]*\) ms (longest store lock hold \([0-9]*\) .*/\1 \2 \3/p' \
    <<<"$line")"
  [ -n "$COMPACT_HOLD_US" ] || { echo "unexpected compaction log line: $line" >&2; exit 1; }
}

section_compaction() {
  echo "## Compaction of a journal of $PLANTS plants ($ROUNDS rounds)"
  echo
  local source=$WORK/compaction.source journal=$WORK/compaction.journal round
  target/release/examples/make_journal "$source" "$PLANTS" --rewrites 2
  echo "make_journal --rewrites 2 (each plant written 3 times); each round starts the"
  echo "server (--data, --sync always) on a fresh copy, and one \`PUT /plants/1\` starts"
  echo "the compaction. The lock hold is the server's own figure: the longest step's"
  echo "wall time, so a step preempted by anything else on the machine counts whole."
  echo
  echo "| round | journal bytes | compacted to | compaction ms | longest store lock hold µs | RSS before KiB | peak RSS while compacting KiB | RSS after KiB |"
  echo "|---|---|---|---|---|---|---|---|"
  COMPACT_HOLDS=() COMPACT_PEAK_GROWTH=0
  for round in $(seq 1 "$ROUNDS"); do
    cp "$source" "$journal"
    compact_once "$journal"
    COMPACT_HOLDS+=("$COMPACT_HOLD_US")
    [ $((RSS_PEAK - RSS_BEFORE)) -le "$COMPACT_PEAK_GROWTH" ] ||
      COMPACT_PEAK_GROWTH=$((RSS_PEAK - RSS_BEFORE))
    echo "| $round | $(stat -c %s "$source") | $COMPACT_BYTES | $COMPACT_MS | $COMPACT_HOLD_US | $RSS_BEFORE | $RSS_PEAK | $RSS_AFTER |"
  done
  echo
}

# The pinned section's helpers.
# start_pinned SERVER [FLAGS...]: starts plantstore (with $PINNED_ARGS and
# FLAGS), the old plantstore (the same way), the reference or nginx on
# CPU 0. A plantstore that has token scopes gets a token file with wrk's
# write token and a read token (an older one, without them, refuses such a
# file: it keeps PLANTSTORE_TOKEN). Either then gets 20 wrong tokens from
# 127.0.0.2, so that the auth-failure limit (on by default) has an entry
# and every request of the run pays the lookup, not only an empty table's
