-- wrk script: pages of GET /plants in name order from anywhere in it. Each
-- request resumes after a plant drawn at random from a journal written by
-- make_journal (ids 0 to PLANTS-1, default 1,000,000, named "plant {id}"),
-- with the cursor a page's Link would carry (name:ID:=NAME, percent-
-- encoded); a plant that make_journal --marked named "plant {id} fern"
-- then starts the page itself, which costs the same. PAGE_PATH (default
-- /plants?sort=name&limit=100) is the rest of the request. The draws are
-- seeded by the clock: a run does not ask the pages its warm-up did.
local token = os.getenv("PLANTSTORE_TOKEN") or "bench"
local plants = tonumber(os.getenv("PLANTS") or "1000000")
local base = os.getenv("PAGE_PATH") or "/plants?sort=name&limit=100"

math.randomseed(os.time())

function request()
  local id = math.random(0, plants - 1)
  local path = string.format("%s&after=name%%3A%d%%3A%%3Dplant%%20%d", base, id, id)
  return wrk.format("GET", path, { ["Authorization"] = "Bearer " .. token })
end

dofile("bench/result.lua")
