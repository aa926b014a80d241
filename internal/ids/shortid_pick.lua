-- Claim a free short id: the first clear bit of the bitmap from a random
-- start byte to the end of the range, then from the beginning to the start.
--
-- KEYS[1] bitmap of the ids in use: bit i is id Min+i
-- KEYS[2] ready flag: the bitmap holds every id of PostgreSQL
-- ARGV[1] bits in the range, Max-Min+1
-- ARGV[2] start byte, 0 <= start < ceil(bits/8), random
--
-- Reply:
--   {CLAIMED, offset}  the bit at offset was clear and is now set
--   {FULL}             every bit of the range is set
--   {REBUILD}          the bitmap or the flag is missing (Redis lost them);
--                      rebuild from PostgreSQL, then call again
local CLAIMED, FULL, REBUILD = 0, 1, 2

local bits, start = tonumber(ARGV[1]), tonumber(ARGV[2])
if not bits or bits < 1 or not start or start < 0 or start > math.floor((bits - 1) / 8) then
  return redis.error_reply('shortid_pick: bad arguments')
end
if redis.call('EXISTS', KEYS[2]) == 0 or redis.call('EXISTS', KEYS[1]) == 0 then
  return {REBUILD}
end
local lastByte = math.floor((bits - 1) / 8)

-- BITPOS only searches bytes the string has: a bitmap made for a smaller
-- range is first extended, keeping the value of its last bit. STRLEN fails
-- on a key of another type, before any write.
if redis.call('STRLEN', KEYS[1]) <= lastByte then
  redis.call('SETBIT', KEYS[1], bits - 1, redis.call('GETBIT', KEYS[1], bits - 1))
end

-- The first clear bit of the range in bytes [from, to], or nil. The explicit
-- end matters: without one, BITPOS for 0 reports the first bit past the
-- string instead of -1. A hit at or past bits lies in the padding of the last
-- byte, so every bit of the range before it is set.
local function firstClear(from, to)
  local pos = redis.call('BITPOS', KEYS[1], 0, from, to)
  if pos < 0 or pos >= bits then
    return nil
  end
  return pos
end

local pos = firstClear(start, lastByte)
if not pos and start > 0 then
  pos = firstClear(0, start - 1)
end
if not pos then
  return {FULL}
end
redis.call('SETBIT', KEYS[1], pos, 1)
return {CLAIMED, pos}
