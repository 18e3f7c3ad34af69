-- wrk script: GET PATH (default /plants?limit=100) with the bearer token.
local token = os.getenv("PLANTSTORE_TOKEN") or "bench"
local path = os.getenv("GET_PATH") or "/plants?limit=100"

function request()
  return wrk.format("GET", path, { ["Authorization"] = "Bearer " .. token })
end

function done(summary, latency, requests)
  local errors = summary.errors.status + summary.errors.connect
    + summary.errors.read + summary.errors.write + summary.errors.timeout
  io.write(string.format("RESULT %.0f %d %d %d\n",
    summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(99), errors))
end
