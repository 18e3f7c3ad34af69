-- The done() hook of bench/post.lua, get.lua and put.lua (wrk runs from the
-- repository root, so they load it with dofile("bench/result.lua")).
-- One machine-readable line for bench/run.sh: requests/s, p50 and p99 in
-- microseconds, the count of non-2xx or failed requests, the count of
-- requests completed, and the slowest request in microseconds.
function done(summary, latency, requests)
  local errors = summary.errors.status + summary.errors.connect
    + summary.errors.read + summary.errors.write + summary.errors.timeout
  io.write(string.format("RESULT %.0f %d %d %d %d %d\n",
    summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(99), errors, summary.requests,
    latency.max))
end
