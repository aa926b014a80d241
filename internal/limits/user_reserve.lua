-- Admit one grab of a user under the user's limits, before the grab script
-- runs: take a token of the user's bucket (USER_GRAB_RATE) and reserve one
-- packet of the user's day (USER_DAILY_GRABS). Either both or nothing is
-- taken. The reservation is released (user_release.lua) when the grab took
-- no packet, so the day's count never passes the cap, whatever envelope,
-- shard or cluster master the grabs go to: the count lives on the user's
-- slot and only this script raises it.
--
-- KEYS[1]  the user's token bucket: hash {tokens, ms}
-- KEYS[2]  the user's packets of the day: a counter
-- ARGV[1]  now, unix milliseconds
-- ARGV[2]  rate: tokens a second, also the bucket's size; 0: no bucket
-- ARGV[3]  cap: packets a day; 0: no cap
-- ARGV[4]  seconds the day's counter is kept
--
-- Reply {code, payload}:
--   ADMITTED      the grab may go ahead
--   RATE_LIMITED  payload: milliseconds until a token is there
--   CAPPED        the day's packets are all received or reserved
local ADMITTED, RATE_LIMITED, CAPPED = 0, 1, 2

local now, rate, cap = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])

local tokens
-- The bucket's time never goes back: a grabber whose clock is behind the
-- last one's earns no refill, and must not hand the next grab on the clock
-- ahead a refill for the time in between either.
local at = now
if rate > 0 then
  local b = redis.call('HMGET', KEYS[1], 'tokens', 'ms')
  tokens = rate
  if b[1] and b[2] then
    local elapsed = math.max(0, now - tonumber(b[2]))
    tokens = math.min(rate, tonumber(b[1]) + elapsed * rate / 1000)
    at = math.max(now, tonumber(b[2]))
  end
  if tokens < 1 then
    return {RATE_LIMITED, math.ceil((1 - tokens) * 1000 / rate)}
  end
end
if cap > 0 and tonumber(redis.call('GET', KEYS[2]) or '0') >= cap then
  return {CAPPED}
end

if rate > 0 then
  redis.call('HSET', KEYS[1], 'tokens', tostring(tokens - 1), 'ms', string.format('%d', at))
  -- A full bucket is no bucket: keep it only while it refills.
  redis.call('PEXPIRE', KEYS[1], math.ceil(1000 * (rate - tokens + 1) / rate) + 1000)
end
if cap > 0 then
  redis.call('INCR', KEYS[2])
  redis.call('EXPIRE', KEYS[2], ARGV[4])
end
return {ADMITTED}
