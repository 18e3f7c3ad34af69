-- wrk script: GET PATH (default /plants?limit=100) with the bearer token.
local token = os.getenv("PLANTSTORE_TOKEN") or "bench"
local path = os.getenv("GET_PATH") or "/plants?limit=100"

function request()
  return wrk.format("GET", path, { ["Authorization"] = "Bearer " .. token })
end

dofile("bench/result.lua")
