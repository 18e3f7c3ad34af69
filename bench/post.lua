-- wrk script: POST /plants with a unique id per request (per thread ranges).
-- Token from the environment variable PLANTSTORE_TOKEN, default "bench".
local counter = 0
local threads = 0
local token = os.getenv("PLANTSTORE_TOKEN") or "bench"

-- Ids are unique per run too: the base moves with the clock.
local run = (os.time() % 1000000) * 1000000000

function setup(thread)
  thread:set("base", run + threads * 100000000)
  threads = threads + 1
end

function request()
  counter = counter + 1
  local body = '{"id":' .. (base + counter) .. ',"name":"plant ' .. counter .. '","tag":"bench"}'
  return wrk.format("POST", "/plants", {
    ["Authorization"] = "Bearer " .. token,
    ["Content-Type"] = "application/json",
  }, body)
end
