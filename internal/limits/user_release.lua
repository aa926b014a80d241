-- Give back what user_reserve.lua took for a grab that took no packet: the
-- reserved packet of the day, and for a holder's repeat the token too (a
-- repeat is never limited).
--
-- KEYS[1]  the user's token bucket: hash {tokens, ms}
-- KEYS[2]  the user's packets of the day: a counter
-- ARGV[1]  rate: the bucket's size; 0: no bucket, or keep the token
-- ARGV[2]  1: release the day's reservation; 0: keep it
--
-- Reply {RELEASED}.
local RELEASED = 0

local rate = tonumber(ARGV[1])
if rate > 0 then
  local tokens = tonumber(redis.call('HGET', KEYS[1], 'tokens') or '')
  if tokens then
    redis.call('HSET', KEYS[1], 'tokens', tostring(math.min(rate, tokens + 1)))
  end
end
if ARGV[2] == '1' and tonumber(redis.call('GET', KEYS[2]) or '0') > 0 then
  redis.call('DECR', KEYS[2])
end
return {RELEASED}
