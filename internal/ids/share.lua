-- Take the next share-code suffix of a day.
--
-- KEYS[1] the shuffled pool: one string of 5-byte entries
-- KEYS[2] the day's counter
-- ARGV[1] entries in the pool
-- ARGV[2] seconds a new day's counter lives
--
-- Reply:
--   {0, entry}  taken: the 5 digits at index counter-1 of the pool
--   {1}         used up: the day's counter is past the pool
--   {2}         no pool: create it (SET NX) and call again
--
-- The pool is checked before the counter moves, so a missing pool costs the
-- day no entry.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {2}
end
local n = redis.call('INCR', KEYS[2])
if n == 1 then
  redis.call('EXPIRE', KEYS[2], ARGV[2])
end
if n > tonumber(ARGV[1]) then
  return {1}
end
local entry = redis.call('GETRANGE', KEYS[1], (n - 1) * 5, n * 5 - 1)
if #entry ~= 5 then
  return redis.error_reply('share pool holds fewer than ' .. ARGV[1] .. ' entries')
end
return {0, entry}
