-- wrk script: stores PLANTS short plants (default 1,000,000) with POST
-- /plants, split between THREADS threads (default 2, as wrk -t2), then
-- stops. Ids are 1..PLANTS, names "plant N", no tag. Once a thread has
-- sent its share its connections ask GET /healthz instead, and the thread
-- stops after 200 of those. wrk itself runs until its -d duration, so
-- bench/run.sh watches the plant count and stops wrk. wrk drops the very
-- first request it builds, so one plant is usually missing: bench/run.sh
-- tops the count up and checks it.
local token = os.getenv("PLANTSTORE_TOKEN") or "bench"
local total = tonumber(os.getenv("PLANTS") or "1000000")
local nthreads = tonumber(os.getenv("THREADS") or "2")
local next_index = 0

function setup(thread)
  thread:set("index", next_index)
  next_index = next_index + 1
end

function init(args)
  local per = math.floor(total / nthreads)
  first = index * per
  share = per
  if index == nthreads - 1 then share = total - per * (nthreads - 1) end
  sent, idle = 0, 0
end

function request()
  if sent < share then
    sent = sent + 1
    local id = first + sent
    return wrk.format("POST", "/plants", {
      ["Authorization"] = "Bearer " .. token,
      ["Content-Type"] = "application/json",
    }, string.format('{"id":%d,"name":"plant %d"}', id, id))
  end
  return wrk.format("GET", "/healthz")
end

function response(status, headers, body)
  if string.find(body, '"status"', 1, true) then
    idle = idle + 1
    if idle >= 200 then wrk.thread:stop() end
  end
end
