-- Reserve numbers of a day's order sequence.
--
-- KEYS[1] the day's counter
-- KEYS[2] the guard: present while Redis still holds every order counter it
--         was given; gone after Redis lost its data
-- ARGV[1] how many numbers to take
-- ARGV[2] lifetime of the counter in seconds, renewed by every reservation
-- ARGV[3] with no guard, the counter is first raised to at least this (the
--         caller read it from PostgreSQL), then the guard is set; "" when the
--         caller has not read it yet
--
-- Reply: the counter after the reservation (the last number taken), or -1
-- when there is no guard and no floor was given: a counter Redis lost would
-- hand out numbers already answered.
if redis.call('EXISTS', KEYS[2]) == 0 then
  if ARGV[3] == '' then
    return -1
  end
  local current = tonumber(redis.call('GET', KEYS[1]) or '0')
  if current < tonumber(ARGV[3]) then
    redis.call('SET', KEYS[1], ARGV[3])
  end
  redis.call('SET', KEYS[2], '1')
end
local last = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return last
