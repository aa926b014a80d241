-- Take the next share-code suffix of a day.
--
-- KEYS[1] the shuffled pool: one string of 5-byte entries
-- KEYS[2] the day's counter
-- ARGV[1] entries in the pool
-- ARGV[2] seconds a new day's counter lives
-- ARGV[3] entries to pass over first (0, but after a code was found in use:
--         a counter that went back, as Redis restarted from an older
--         file, hands out the codes after it again); never past the
--         pool's last entry
--
-- Reply:
--   {TAKEN, entry}  the 5 digits at index counter-1 of the pool
--   {USED_UP}       the day's counter is past the pool
--   {NO_POOL}       no pool (or one too short to be ours): create it (SET NX)
--                   and call again
--
-- The pool is checked before the counter moves, so a missing pool costs the
-- day no entry, and nothing can fail after the counter moved.
local TAKEN, USED_UP, NO_POOL = 0, 1, 2

local size, ttl, skip = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if not size or size < 1 or not ttl or ttl < 1 or ttl ~= math.floor(ttl)
    or not skip or skip < 0 or skip ~= math.floor(skip) then
  return redis.error_reply('share: bad arguments')
end
-- STRLEN fails on a key of another type, before any write.
if redis.call('STRLEN', KEYS[1]) < size * 5 then
  return {NO_POOL}
end
-- A skip never passes the day's last code: past it the day would be used up
-- with codes still free before it.
local at = tonumber(redis.call('GET', KEYS[2]) or 0)
if not at then
  return redis.error_reply('share: the day counter is not a number')
end
skip = math.max(0, math.min(skip, size - at - 1))
local n = redis.call('INCRBY', KEYS[2], skip + 1)
if n == skip + 1 then
  redis.call('EXPIRE', KEYS[2], ttl)
end
if n > size then
  return {USED_UP}
end
return {TAKEN, redis.call('GETRANGE', KEYS[1], (n - 1) * 5, n * 5 - 1)}
