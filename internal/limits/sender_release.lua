-- Give back the cents sender_reserve.lua counted for a create that wrote no
-- envelope: what its reservation holds, once. A reservation that is gone
-- (given back already, never made because the reserve did not run, or
-- expired) gives back nothing, so the counter never drops below what the
-- day's other creates hold. Its first write is a DEL, which a Redis at its
-- memory limit does not refuse.
--
-- KEYS[1]  the sender's cents of the day: a counter
-- KEYS[2]  the create's reservation (Keys.SenderReservation)
--
-- Reply {code}:
--   RELEASED  the reservation's cents are given back
--   NOT_HELD  there was no reservation to give back
local RELEASED, NOT_HELD = 0, 1

local cents = tonumber(redis.call('GET', KEYS[2]) or '0')
if cents < 1 then
  return {NOT_HELD}
end
redis.call('DEL', KEYS[2])
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
cents = math.min(cents, used)
if cents > 0 then
  redis.call('DECRBY', KEYS[1], cents)
end
return {RELEASED}
