# The hostile section of bench/run.sh (`bench/run.sh hostile`): what an
# attacker's load leaves of the service to others. The flood: wrong tokens
# from 100 addresses, 100 requests a second in all, with the default
# failure limits (the server-wide one full all along), and the share of its
# requests served to a client that used its right token before (on new
# connections, and on one kept alive) and to one new to the server
# (bench/flood.py). Searches shared: one client's rare searches (a scan of
# every plant each, $SCAN_PLANTS of them) alone, then beside a client
# looping them on 8 connections (as many as it may have queued) and on 16
# (half of them answered 503 at once, and retried at once): its p50 and
# worst, and the hog's share (bench/fair.py). With OLD, each against the old binary first.
# Sourced by bench/run.sh after bench/lib/*.sh, whose helpers it calls.
# shellcheck shell=bash

FLOOD_SECONDS=${FLOOD_SECONDS:-10}
SCAN_PLANTS=${SCAN_PLANTS:-$(( PLANTS < 200000 ? PLANTS : 200000 ))}

section_hostile() {
  echo "## A flood of wrong tokens from 100 addresses (100/s in all, ${FLOOD_SECONDS} s)"
  echo
  echo "| build | client | requests | 200 | served | 429 server-wide | 429 this address | other |"
  echo "|---|---|---|---|---|---|---|---|"
  local build bin
  for build in ${OLD_BIN:+old} new; do
    bin=$BIN
    [ "$build" = old ] && bin=$OLD_BIN
    BIN=$bin start_server
    python3 bench/flood.py "$ADDR" "$TOKEN" "$FLOOD_SECONDS" | sed "s/^|/| $build |/"
    stop_server
  done
  echo
  echo "## Searches shared: a client's rare searches beside another's loop ($SCAN_PLANTS plants, ${FLOOD_SECONDS} s each)"
  echo
  local journal=$WORK/fair.journal
  target/release/examples/make_journal "$journal" "$SCAN_PLANTS" >/dev/null
  echo "| build | hog connections | alone p50 ms | alone max ms | beside p50 ms | beside max ms | hog searches/s | hog 503s |"
  echo "|---|---|---|---|---|---|---|---|"
  local hogs
  for build in ${OLD_BIN:+old} new; do
    bin=$BIN
    [ "$build" = old ] && bin=$OLD_BIN
    for hogs in 8 16; do
      BIN=$bin start_server --data "$journal"
      python3 bench/fair.py "$ADDR" "$TOKEN" "$FLOOD_SECONDS" "$hogs" | sed "s/^|/| $build | $hogs |/"
      stop_server
    done
  done
  echo
}
