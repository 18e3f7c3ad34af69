-- wrk script: POST /plants with a unique id per request (per thread ranges).
-- Token from the environment variable PLANTSTORE_TOKEN, default "bench".
local counter = 0
local threads = 0
local token = os.getenv("PLANTSTORE_TOKEN") or "bench"

-- Ids are unique per run too: the base moves with the clock. Numbers are
-- doubles here, so ids stay below 2^53 and are printed with %d (the default
-- number format would round them to 14 digits).
local run = (os.time() % 100000) * 10000000000

function setup(thread)
  thread:set("base", run + threads * 1000000000)
  threads = threads + 1
end

function request()
  counter = counter + 1
  local body = string.format('{"id":%d,"name":"plant %d","tag":"bench"}', base + counter, counter)
  return wrk.format("POST", "/plants", {
    ["Authorization"] = "Bearer " .. token,
    ["Content-Type"] = "application/json",
  }, body)
end

dofile("bench/result.lua")
