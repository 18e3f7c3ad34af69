# The budgets section of bench/run.sh (`bench/run.sh budgets`, last by
# default): every budget of the spec, met or not, from the figures the
# sections before it set in this shell (SUM, IDLE, HTTPS_SIZE, ...); a
# section not run leaves its rows out.
# shellcheck shell=bash

# met CONDITION: "met" or "NOT met".
met() { if awk "BEGIN{exit !($1)}"; then echo met; else echo "**NOT met**"; fi; }
# met_at_scale CONDITION: as met, for a budget stated for 1,000,000 plants:
# not judged when $PLANTS is another count.
met_at_scale() {
  if [ "$PLANTS" = 1000000 ]; then met "$1"; else echo "not judged ($PLANTS plants)"; fi
}

section_budgets() {
  echo "## Budgets (this run)"
  echo
  echo "| budget | measured | |"
  echo "|---|---|---|"
  local conns ours theirs p99 ref_p99
  for conns in 16 64; do
    [ -n "${SUM[plantstore.$conns.rps]:-}" ] || continue
    ours=${SUM[plantstore.$conns.rps]} theirs=${SUM[reference.$conns.rps]}
    p99=$(awk "BEGIN{printf \"%.2f\", ${SUM[plantstore.$conns.p99]}/$ROUNDS}")
    ref_p99=$(awk "BEGIN{printf \"%.2f\", ${SUM[reference.$conns.p99]}/$ROUNDS}")
    echo "| POST at $conns connections >= 1.0x reference (mean of rounds) | $(ratio "$ours" "$theirs")x | $(met "$ours >= $theirs") |"
    echo "| p99 at $conns connections <= reference's (mean of rounds) | $p99 vs $ref_p99 ms | $(met "$p99 <= $ref_p99") |"
  done
  if [ -n "${IDLE:-}" ]; then
    echo "| idle RSS (ps, default flags, largest of 3 starts) <= 2 MiB (2048 KiB) | $IDLE KiB in memory, $IDLE_DATA KiB with --data | $(met "$IDLE <= 2048 && $IDLE_DATA <= 2048") |"
    [ -z "${IDLE_STATIC:-}" ] ||
      echo "| idle RSS of the static build <= 2 MiB (2048 KiB) | $IDLE_STATIC KiB ($STATIC_TARGET) | $(met "$IDLE_STATIC <= 2048") |"
    echo "| 1,000,000 plants in <= 102400 KiB more RSS | $((LOADED - IDLE)) KiB more ($LOADED KiB) | $(met_at_scale "$LOADED - $IDLE <= 102400") |"
    if [ "$HOST" = x86_64-unknown-linux-gnu ]; then
      echo "| published x86_64 binary, plain build (FEATURES=plain scripts/release-build.sh x86_64-unknown-linux-gnu) <= 600 KiB (614400 bytes) | $SIZE bytes | $(met "$SIZE <= 614400") |"
      echo "| published x86_64 binary, HTTPS build (scripts/release-build.sh x86_64-unknown-linux-gnu) <= 1.25 MiB (1310720 bytes) | $HTTPS_SIZE bytes | $(met "$HTTPS_SIZE <= 1310720") |"
    else
      echo "| published x86_64 binary, plain build <= 600 KiB (614400 bytes) | $SIZE bytes ($HOST build) | not judged (not x86_64) |"
    fi
  fi
  if [ -n "${HTTPS_KEEPALIVE:-}" ]; then
    echo "| HTTPS keep-alive POST at 64 connections >= 1.0x nginx with TLS 1.3, the same certificate (one core each, mean of rounds) | ${HTTPS_KEEPALIVE}x | $(met "$HTTPS_KEEPALIVE >= 1.0") |"
    echo "| a new TLS 1.3 connection per request >= 0.8x nginx, full handshakes | ${HTTPS_NEW}x | $(met "$HTTPS_NEW >= 0.8") |"
    echo "| a new TLS 1.3 connection per request >= 0.8x nginx, session resumption | ${HTTPS_REUSE}x | $(met "$HTTPS_REUSE >= 0.8") |"
    echo "| 1,000 idle TLS connections add <= 32 MiB (32768 KiB) | $TLS_IDLE_GROWTH KiB | $(met "$TLS_IDLE_GROWTH <= 32768") |"
  fi
  if [ -n "${PG_RATIO:-}" ]; then
    echo "| PostgreSQL store at $PG_CONNS connections >= 2.5x pgbench running its single-row INSERT (mean of rounds) | ${PG_RATIO}x | $(met "$PG_RATIO >= 2.5") |"
    echo "| plantstore CPU per request on PostgreSQL <= 15 µs | $PG_ONE_CPU_US µs | $(met "$PG_ONE_CPU_US <= 15") |"
    echo "| PostgreSQL CPU per stored plant <= 20 µs | $PG_ONE_PG_US µs | $(met "$PG_ONE_PG_US <= 20") |"
  fi
  [ -n "${HEALTH_MAX:-}" ] &&
    echo "| /healthz turns 503 and back within 1 s, stopped or frozen (slowest) | $HEALTH_MAX ms | $(met "$HEALTH_MAX <= 1000") |"
  [ -n "${DURABLE_RATIO:-}" ] &&
    echo "| --sync always at 64 connections >= 0.8x in memory | ${DURABLE_RATIO}x | $(met "$DURABLE_RATIO >= 0.8") |"
  [ -n "${STARTUP_MAX:-}" ] &&
    echo "| start-up with a journal of 1,000,000 plants < 1 s (slowest of 3) | $STARTUP_MAX ms | $(met_at_scale "$STARTUP_MAX < 1000") |"
  [ -n "${STARTUP_PEAK_OVER:-}" ] &&
    echo "| start-up peak RSS <= the RSS once started + 16384 KiB (largest of 3) | +$STARTUP_PEAK_OVER KiB | $(met "$STARTUP_PEAK_OVER <= 16384") |"
  [ -n "${RESTART_MAX:-}" ] &&
    echo "| restart after a crafted torn tail of 1 MiB < 1 s (slowest of every tail and run) | $RESTART_MAX ms | $(met "$RESTART_MAX < 1000") |"
  if [ -n "${SUM[writers.loaded.p99]:-}" ]; then
    local loaded alone
    loaded=$(mean writers.loaded.p99 3) alone=$(mean writers.alone.p99 3)
    echo "| writers' p99 under looping worst-case listings <= 1 ms, 1,000,000 plants (mean of rounds) | $loaded ms (alone: $alone ms, $(ratio "$loaded" "$alone")x; largest max $WRITERS_MAX ms) | $(met_at_scale "$loaded <= 1") |"
  fi
  if [ -n "${SUM[writers.large.p99]:-}" ]; then
    local large
    large=$(mean writers.large.p99 3)
    echo "| writers' p99 under 4 loops of 256 KiB pages <= 5 ms (mean of rounds) | $large ms | $(met "$large <= 5") |"
  fi
  if [ -n "${SUM[query.memory.any.p99]:-}" ]; then
    local first any search writer
    first=$(mean query.memory.first.p99) any=$(mean query.memory.any.p99)
    search=$(mean query.memory.search.p99) writer=$(mean query.writer.p99 3)
    echo "| \`?sort=name&limit=100\`, any page: p99 <= 5 ms, 1,000,000 plants, memory store (mean of rounds; pages after random plants, and the first) | $any ms, first page $first ms (first page in id order: $(mean query.memory.id.p99) ms) | $(met_at_scale "$any <= 5 && $first <= 5") |"
    echo "| \`?q=\` matching 1 plant in 10,000, first page: p99 <= 100 ms (mean of rounds) | $search ms | $(met_at_scale "$search <= 100") |"
    echo "| writers' p99 while 4 clients loop that search <= 1 ms (mean of rounds) | $writer ms (alone: $(mean query.alone.p99 3) ms) | $(met_at_scale "$writer <= 1") |"
    echo "| memory for the name order <= 48 bytes a plant | $QUERY_ORDER_BYTES bytes ($QUERY_ORDER_HOW) | $(PLANTS=$QUERY_ORDER_AT met_at_scale "$QUERY_ORDER_BYTES <= 48") |"
  fi
  if [ -n "${SUM[query.postgres.any.p99]:-}" ]; then
    local first any search
    first=$(mean query.postgres.first.p99) any=$(mean query.postgres.any.p99)
    search=$(mean query.postgres.search.p99)
    echo "| PostgreSQL, 1,000,000 rows: \`?sort=name\` page p99 <= 10 ms (mean of rounds; after random plants, and the first) | $any ms, first page $first ms (first page in id order: $(mean query.postgres.id.p99) ms) | $(met_at_scale "$any <= 10 && $first <= 10") |"
    echo "| PostgreSQL, 1,000,000 rows: \`?q=\` with the trigram index p99 <= 50 ms (mean of rounds) | $search ms$([ -n "${QUERY_PG_TRGM:-}" ] || echo ", **no trigram index**") | $(met_at_scale "$search <= 50") |"
  fi
  if [ -n "${COMPACT_HOLDS[*]:-}" ]; then
    # The largest round is judged: a writer waits as long as the worst hold.
    local hold
    hold=$(printf '%s\n' "${COMPACT_HOLDS[@]}" | sort -n | tail -1)
    echo "| longest store lock hold while compacting 1,000,000 plants < 5 ms (largest of rounds) | $hold µs (rounds: ${COMPACT_HOLDS[*]} µs; RSS at most $COMPACT_PEAK_GROWTH KiB above before) | $(met_at_scale "$hold < 5000") |"
  fi
  local cpu nginx_cpu ctx nginx nginx_p99
  for conns in 16 64 1024; do
    # Not with OLD: the pinned section then runs no reference or nginx.
    [ -n "${SUM[pinned.plantstore.$conns.rps]:-}" ] &&
      [ -n "${SUM[pinned.reference.$conns.rps]:-}" ] || continue
    cpu=$(mean "pinned.plantstore.$conns.cpu" 1) nginx_cpu=$(mean "pinned.nginx.$conns.cpu" 1)
    ctx=$(mean "pinned.plantstore.$conns.ctx" 3)
    ours=${SUM[pinned.plantstore.$conns.rps]} theirs=${SUM[pinned.reference.$conns.rps]}
    nginx=${SUM[pinned.nginx.$conns.rps]}
    p99=$(mean "pinned.plantstore.$conns.p99" 3) ref_p99=$(mean "pinned.reference.$conns.p99" 3)
    nginx_p99=$(mean "pinned.nginx.$conns.p99" 3)
    echo "| pinned, $conns connections: requests/s >= the reference's and nginx's | $(ratio "$ours" "$theirs")x, $(ratio "$ours" "$nginx")x | $(met "$ours >= $theirs && $ours >= $nginx") |"
    echo "| pinned, $conns connections: p99 <= the reference's and nginx's | $p99 vs $ref_p99 and $nginx_p99 ms | $(met "$p99 <= $ref_p99 && $p99 <= $nginx_p99") |"
    echo "| pinned, $conns connections: server CPU per request as close to nginx's as it gets (aim 0.9x) | $cpu vs $nginx_cpu µs ($(ratio "$cpu" "$nginx_cpu")x) | aim $(met "$cpu <= 0.9 * $nginx_cpu") |"
    echo "| pinned, $conns connections: context switches per request < 0.1 | $ctx | $(met "$ctx < 0.1") |"
  done
  if [ -n "${FEED_IDLE_RATIO:-}" ]; then
    echo "| POST at 64 connections with 100 idle feed subscribers (following another tag) >= 0.9x without (sum of rounds) | ${FEED_IDLE_RATIO}x | $(met "$FEED_IDLE_RATIO >= 0.9") |"
    echo "| every subscriber gets every event: 100 at 5,000 changes/s, 1,000 at 500/s | $([ "$FEED_COMPLETE" = 1 ] && echo all || echo "not all") | $(met "$FEED_COMPLETE == 1") |"
    echo "| a change reaches a subscriber within 1 s (p99, slowest run) | $FEED_DELAY_P99 ms | $(met "$FEED_DELAY_P99 <= 1000") |"
  fi
  if [ -n "${HOLD_GROWTH:-}" ]; then
    echo "| $IDLE_CONNS idle connections in <= 20480 KiB more RSS (all held) | $HOLD_GROWTH KiB, $HOLD_HELD held | $(met "$HOLD_HELD == $IDLE_CONNS && $HOLD_GROWTH <= 20480") |"
    echo "| a fresh client's p99 < 10 ms with them open | $HOLD_P99 ms | $(met "$HOLD_P99 < 10") |"
  fi
  echo
}
