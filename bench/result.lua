-- The done() hook of bench/post.lua and bench/get.lua (wrk runs from the
-- repository root, so they load it with dofile("bench/result.lua")).
-- One machine-readable line for bench/run.sh: requests/s, p50 and p99 in
-- microseconds, the count of non-2xx or failed requests, and the count of
-- requests completed.
function done(summary, latency, requests)
  local errors = summary.errors.status + summary.errors.connect
    + summary.errors.read + summary.errors.write + summary.errors.timeout
  io.write(string.format("RESULT %.0f %d %d %d %d\n",
    summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(99), errors, summary.requests))
end
