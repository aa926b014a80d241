-- Claim a free short id: the first clear bit of the bitmap from a random
-- start byte to the end of the range, then from the beginning to the start.
--
-- KEYS[1] bitmap of the ids in use: bit i is id Min+i
-- KEYS[2] ready flag: the bitmap holds every id of PostgreSQL
-- ARGV[1] bits in the range, Max-Min+1
-- ARGV[2] start byte, 0 <= start < ceil(bits/8), random
--
-- Reply:
--   {0, offset}  claimed: the bit at offset was clear and is now set
--   {1}          full: every bit of the range is set
--   {2}          rebuild: the bitmap or the flag is missing (Redis lost
--                them); rebuild from PostgreSQL, then call again
if redis.call('EXISTS', KEYS[2]) == 0 or redis.call('EXISTS', KEYS[1]) == 0 then
  return {2}
end
local bits = tonumber(ARGV[1])
local lastByte = math.floor((bits - 1) / 8)
local start = tonumber(ARGV[2])

-- BITPOS only searches bytes the string has: a bitmap made for a smaller
-- range is first extended, keeping the value of its last bit.
if redis.call('STRLEN', KEYS[1]) <= lastByte then
  redis.call('SETBIT', KEYS[1], bits - 1, redis.call('GETBIT', KEYS[1], bits - 1))
end

-- The first clear bit of the range in bytes [from, to], or -1. The explicit
-- end matters: without one, BITPOS for 0 reports the first bit past the
-- string instead of -1. A hit at or past bits lies in the padding of the last
-- byte, so every bit of the range before it is set.
local function firstClear(from, to)
  local pos = redis.call('BITPOS', KEYS[1], 0, from, to)
  if pos < 0 or pos >= bits then
    return -1
  end
  return pos
end

local pos = firstClear(start, lastByte)
if pos < 0 and start > 0 then
  pos = firstClear(0, start - 1)
end
if pos < 0 then
  return {1}
end
redis.call('SETBIT', KEYS[1], pos, 1)
return {0, pos}
