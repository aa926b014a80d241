-- Reserve a create's cents on its sender's day (SENDER_DAILY_CENTS), before
-- the envelope is written; a create that wrote nothing gives them back with
-- a negative amount.
--
-- KEYS[1]  the sender's cents of the day: a counter
-- ARGV[1]  cents: to reserve (> 0) or give back (< 0)
-- ARGV[2]  cap: cents a day
-- ARGV[3]  seconds the counter is kept
--
-- Reply {code}:
--   RESERVED  the cents are counted (or given back)
--   CAPPED    they would pass the cap; nothing was counted
local RESERVED, CAPPED = 0, 1

local cents, cap = tonumber(ARGV[1]), tonumber(ARGV[2])
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if cents > 0 and used + cents > cap then
  return {CAPPED}
end
if cents < 0 and used + cents < 0 then
  cents = -used
end
redis.call('INCRBY', KEYS[1], cents)
redis.call('EXPIRE', KEYS[1], ARGV[3])
return {RESERVED}
