-- wrk script: PUT /plants/{id} over the plants of a journal written by
-- make_journal (ids 0 to PLANTS-1, default 1,000,000): ids 1, 11, 21, ...
-- in turn, plants without a tag, each replaced by the same plant, so the
-- store's size and its tag index stay as they were. One connection is one
-- writer loop.
local token = os.getenv("PLANTSTORE_TOKEN") or "bench"
local plants = tonumber(os.getenv("PLANTS") or "1000000")
local id = 1

function request()
  local body = string.format('{"name":"plant %d"}', id)
  local path = string.format("/plants/%d", id)
  id = id + 10
  if id >= plants then id = 1 end
  return wrk.format("PUT", path, {
    ["Authorization"] = "Bearer " .. token,
    ["Content-Type"] = "application/json",
  }, body)
end

dofile("bench/result.lua")
