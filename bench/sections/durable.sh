# The durable section of bench/run.sh (`bench/run.sh durable`): POST
# /plants in memory vs --data, --sync always and never, each build on one
# core: the server (every thread) pinned to CPU 0 with taskset, wrk -t1 on
# CPU 1, at 64 connections and then at one. For each run: requests/s, p50,
# p99, the server's CPU per request and, for --data, the bytes the journal's
# block device was sent per acknowledged change (/proc/diskstats' sectors
# written over the measured run, the file system's metadata commits
# included; the process's own write_bytes leaves those out). With OLD set
# (bench/run.sh's header), the old build runs before the new one in each
# round, same flags, so old and new alternate in one run. $ROUNDS rounds;
# the summary is the median of rounds. Within a round and build the runs
# at 64 connections go first, memory, always and never one after the other
# (a fresh server each), then those at one connection; the order turns by
# one each round (memory first, then always, then never), so that being
# the first run after a pause favours none (use a multiple of 3 rounds).
# Each durable run's CPU is also divided by the same round's memory run,
# and the summary gives the median and the range of those ratios over
# rounds: drift between runs farther apart moves them less (on a shared
# machine one build's memory runs alone differ by a fifth from one run to
# the next). Drift within a round still moves them, so each round ends
# with memory and --sync never side by side (`side_by_side`): both
# servers at once on CPU 0, so both see the same host, and --sync never's
# budget is judged on that ratio.
# The journal is written in
# $DURABLE_DIR (default: the run's scratch folder), which must be on a
# block device (not tmpfs): its device's counters are shared with every
# other writer of that device, so run it on a quiet machine, or give it a
# device of its own (an ext4 image with 4 KiB blocks, mounted with `mount -o
# loop`: its loop device counts the journal alone); `sync` runs before
# each measured run so that earlier dirty pages are not counted.
# --sync never's bytes are not reported: the kernel writes them back later,
# outside the run. The figures the budgets section judges: DURABLE_RATIO and
# DURABLE_CPU_RATIO (--sync always at 64 connections against in memory, the
# new build's medians), DURABLE_NEVER_CPU_RATIO and DURABLE_NEVER_CPU_RANGE
# (--sync never's ratios side by side, per round: median, range). Sourced by bench/run.sh after bench/lib/*.sh, whose
# helpers it calls.
# shellcheck shell=bash

# durable_device DIR: the name /proc/diskstats gives the block device DIR
# is on (sda1, vda, mmcblk0p2), or nothing when it is not on one (tmpfs,
# overlay).
durable_device() {
  local number
  number=$(stat -c '%Hd:%Ld' "$1")
  [ -e "/sys/dev/block/$number" ] || return 0
  basename "$(readlink -f "/sys/dev/block/$number")"
}

# device_bytes: bytes written to $DURABLE_DEVICE so far (sectors written,
# the tenth field of /proc/diskstats, are 512 bytes whatever the device).
device_bytes() {
  awk -v dev="$DURABLE_DEVICE" '$3 == dev {printf "%.0f\n", $10 * 512}' /proc/diskstats
}

# disk_bytes start|stop: pinned_run's MEASURE: sets DISK_BYTES to the bytes
# written to the journal's device over the measured run.
disk_bytes() {
  if [ "$1" = start ]; then
    sync
    DISK_START=$(device_bytes)
  else
    DISK_BYTES=$(($(device_bytes) - DISK_START))
  fi
}

# new_old FIGURE [PLACES]: the new build's median of FIGURE over the old
# one's.
new_old() { ratio "$(median "plantstore.$1" "${2:-1}")" "$(median "old.$1" "${2:-1}")"; }

# side_by_side BUILD DIR: the build in memory and with `--sync never` (its
# journal in DIR) at the same time, both servers on CPU 0, each loaded by
# its own wrk -t1 -c64 on CPU 1: a 2 s warm-up, then $DURATION measured.
# Both share the core, so a change in the host's speed reaches both alike,
# where runs one after the other each see their own. Sets SIDE_MEMORY and
# SIDE_NEVER (server CPU µs per request) and SIDE_RPS_MEMORY and
# SIDE_RPS_NEVER. `--sync always` is not measured this way: its server
# waits for the disk while the other takes the core, and smaller batches
# cost more per request, so that pair would measure the sharing.
side_by_side() {
  local build=$1 dir=$2 memory_pid memory_addr memory_ticks never_ticks
  local SIDE_CPU=1
  start_pinned "$build"
  memory_pid=$SERVER_PID memory_addr=$ADDR
  EXTRA_PIDS+=("$memory_pid")
  rm -f "$dir/bench.journal"
  start_pinned "$build" --data "$dir/bench.journal" --sync never
  side_pair "$memory_addr" "$ADDR" 2s
  memory_ticks=$(ticks_of "$memory_pid") never_ticks=$(cpu_ticks)
  side_pair "$memory_addr" "$ADDR" "$DURATION"
  memory_ticks=$(($(ticks_of "$memory_pid") - memory_ticks))
  never_ticks=$(($(cpu_ticks) - never_ticks))
  stop_extra
  stop_server
  rm -f "$dir/bench.journal"
  read -r _ SIDE_RPS_MEMORY _ <"$WORK/side.1"
  read -r _ SIDE_RPS_NEVER _ <"$WORK/side.2"
  SIDE_MEMORY=$(side_us "$memory_ticks" "$WORK/side.1")
  SIDE_NEVER=$(side_us "$never_ticks" "$WORK/side.2")
}

section_durable() {
  CLK_TCK=$(getconf CLK_TCK)
  local dir=${DURABLE_DIR:-$WORK}
  DURABLE_DEVICE=$(durable_device "$dir")
  # start_pinned's names for the builds; label prints them as old and new.
  local builds=(plantstore)
  [ -z "$OLD_BIN" ] || builds=(old plantstore)
  echo "## POST /plants: in memory vs --data, one core each (server on CPU 0, wrk -t1 on CPU 1; $DURATION, $ROUNDS rounds)"
  echo
  [ -z "$OLD_BIN" ] || { describe_binaries; echo; }
  if [ -n "$DURABLE_DEVICE" ]; then
    echo "The journal in $dir, on the block device $DURABLE_DEVICE; bytes per change: what"
    echo "that device was sent over the measured run (/proc/diskstats) per 2xx answer."
  else
    echo "The journal in $dir, on no block device (tmpfs?): bytes written not measured"
    echo "(DURABLE_DIR= a folder on a real disk)."
  fi
  echo
  echo "| round | build | storage | connections | requests/s | p50 ms | p99 ms | errors | server CPU µs/request | bytes per change |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  local round build storage conns flags bytes order
  local -A cpu_of
  for round in $(seq 1 "$ROUNDS"); do
    order=(memory always never memory always)
    order=("${order[@]:$(((round - 1) % 3)):3}")
    for build in "${builds[@]}"; do
      for conns in 64 1; do
        for storage in "${order[@]}"; do
          flags=()
          if [ "$storage" != memory ]; then
            rm -f "$dir/bench.journal"
            flags=(--data "$dir/bench.journal" --sync "$storage")
          fi
          start_pinned "$build" "${flags[@]}"
          DISK_BYTES=
          if [ "$storage" = always ] && [ -n "$DURABLE_DEVICE" ]; then
            MEASURE=disk_bytes pinned_run "$conns"
          else
            pinned_run "$conns"
          fi
          stop_server
          rm -f "$dir/bench.journal"
          bytes=-
          if [ -n "$DISK_BYTES" ]; then
            bytes=$(awk "BEGIN{n = $REQUESTS - $ERRORS; printf \"%.0f\", (n > 0 ? $DISK_BYTES / n : 0)}")
            keep "$build.$storage.$conns.bytes" "$bytes"
          fi
          keep "$build.$storage.$conns.rps" "$RPS"
          keep "$build.$storage.$conns.cpu" "$CPU_US"
          keep "$build.$storage.$conns.p50" "$P50"
          cpu_of[$storage]=$CPU_US
          echo "| $round | $(label "$build") | $storage | $conns | $RPS | $P50 | $P99 | $ERRORS | $CPU_US | $bytes |"
        done
        for storage in memory always never; do
          keep "$build.$storage.$conns.xmem" "$(ratio "${cpu_of[$storage]}" "${cpu_of[memory]}")"
        done
      done
      side_by_side "$build" "$dir"
      keep "$build.side.memory" "$SIDE_MEMORY"
      keep "$build.side.never" "$SIDE_NEVER"
      keep "$build.side.xmem" "$(ratio "$SIDE_NEVER" "$SIDE_MEMORY")"
      echo "| $round | $(label "$build") | memory, beside never | 64 | $SIDE_RPS_MEMORY | - | - | - | $SIDE_MEMORY | - |"
      echo "| $round | $(label "$build") | never, beside memory | 64 | $SIDE_RPS_NEVER | - | - | - | $SIDE_NEVER | - |"
    done
  done
  echo
  echo "Medians of rounds; \"x memory\": against the same build in memory."
  echo
  echo "| build | storage | requests/s, 64 conns | x memory | server CPU µs/request, 64 conns | x memory | x memory, per round: median (range) | c1 p50 ms | c1 server CPU µs/request | bytes per change, c1 | bytes per change, 64 conns |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  local rps cpu mem_rps mem_cpu b1 b64 paired
  for build in "${builds[@]}"; do
    mem_rps=$(median "$build.memory.64.rps" 0) mem_cpu=$(median "$build.memory.64.cpu")
    for storage in memory always never; do
      rps=$(median "$build.$storage.64.rps" 0) cpu=$(median "$build.$storage.64.cpu")
      b1=- b64=-
      [ -z "${VALUES[$build.$storage.1.bytes]:-}" ] || b1=$(median "$build.$storage.1.bytes" 0)
      [ -z "${VALUES[$build.$storage.64.bytes]:-}" ] || b64=$(median "$build.$storage.64.bytes" 0)
      paired="$(median "$build.$storage.64.xmem" 2) ($(range "$build.$storage.64.xmem"))"
      echo "| $(label "$build") | $storage | $rps | $(ratio "$rps" "$mem_rps") | $cpu | $(ratio "$cpu" "$mem_cpu") |" \
        "$paired | $(median "$build.$storage.1.p50" 3) | $(median "$build.$storage.1.cpu") | $b1 | $b64 |"
      if [ "$build" = plantstore ] && [ "$storage" = always ]; then
        DURABLE_RATIO=$(ratio "$rps" "$mem_rps") DURABLE_CPU_RATIO=$(ratio "$cpu" "$mem_cpu")
      fi
    done
  done
  echo
  echo "Side by side (\"beside\" rows): the build in memory and with --sync never at the same time,"
  echo "both on CPU 0, each with its own wrk -t1 -c64 on CPU 1, so that both see the same host."
  echo
  echo "| build | memory CPU µs/request | never CPU µs/request | never x memory, per round: median (range) |"
  echo "|---|---|---|---|"
  for build in "${builds[@]}"; do
    echo "| $(label "$build") | $(median "$build.side.memory" 2) | $(median "$build.side.never" 2) |" \
      "$(median "$build.side.xmem" 2) ($(range "$build.side.xmem")) |"
  done
  DURABLE_NEVER_CPU_RATIO=$(median plantstore.side.xmem 2)
  DURABLE_NEVER_CPU_RANGE=$(range plantstore.side.xmem)
  echo
  if [ -n "$OLD_BIN" ]; then
    echo "New / old, medians (above 1: more requests/s, more CPU, a longer p50, more bytes):"
    echo
    echo "| storage | requests/s, 64 conns | server CPU, 64 conns | c1 p50 | bytes per change, c1 |"
    echo "|---|---|---|---|---|"
    for storage in memory always never; do
      b1=-
      [ -z "${VALUES[plantstore.$storage.1.bytes]:-}" ] || b1=$(new_old "$storage.1.bytes" 0)
      echo "| $storage | $(new_old "$storage.64.rps" 0) | $(new_old "$storage.64.cpu") |" \
        "$(new_old "$storage.1.p50" 3) | $b1 |"
    done
    echo
  fi
}
