-- Reserve a create's cents on its sender's day (SENDER_DAILY_CENTS), before
-- the envelope is written, and remember them under the create's own key, so
-- that giving them back (sender_release.lua) takes back exactly what this
-- create counted, once, even when this call's answer was lost.
--
-- KEYS[1]  the sender's cents of the day: a counter
-- KEYS[2]  this create's reservation (Keys.SenderReservation): its cents
-- ARGV[1]  cents to reserve (> 0)
-- ARGV[2]  cap: cents a day
-- ARGV[3]  seconds the counter is kept
-- ARGV[4]  seconds the reservation is kept
--
-- Reply {code}:
--   RESERVED  the cents are counted
--   CAPPED    they would pass the cap; nothing was counted
local RESERVED, CAPPED = 0, 1

local cents, cap = tonumber(ARGV[1]), tonumber(ARGV[2])
if not cents or cents < 1 or cents ~= math.floor(cents) then
  return redis.error_reply('sender_reserve: bad cents')
end
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used + cents > cap then
  return {CAPPED}
end
redis.call('INCRBY', KEYS[1], cents)
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('SET', KEYS[2], cents, 'EX', ARGV[4])
return {RESERVED}
