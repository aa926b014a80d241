-- wrk script for bench/wrk.sh: POSTs a grab with a new user id every time.
-- wrk loads the script once per thread, in a Lua state of its own: setup()
-- runs in the main state and hands each thread its number as the global
-- thread_no, which request() reads; the ids are the thread's number and a
-- count, so no two requests of a run share one (a repeat would be answered
-- 200 without taking a packet, and cheaper).
local next_thread = 0
function setup(thread)
  next_thread = next_thread + 1
  thread:set("thread_no", next_thread)
end

local sent = 0
function init(args)
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  sent = sent + 1
  -- wrk.headers (with any -H given to wrk) apply when no table is passed.
  return wrk.format("POST", nil, nil, string.format('{"user_id":"w%d-%d-%d"}', thread_no, sent, os.time()))
end
