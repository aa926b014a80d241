-- wrk script for bench/wrk.sh: POSTs a grab with a new user id every time
-- (thread number, request number and a random number), so every grab takes
-- a packet until the envelope is sold out.
local thread_no = 0
function setup(thread)
  thread_no = thread_no + 1
  thread:set("thread_no", thread_no)
end

local sent = 0
function request()
  sent = sent + 1
  local body = string.format('{"user_id":"w%d-%d-%d"}', thread_no, sent, math.random(1, 1000000000))
  return wrk.format("POST", nil, {["Content-Type"] = "application/json"}, body)
end
