-- Stage a chunk of a large envelope's packets in a list of the loader's
-- own, which load.lua then makes the envelope's pool in one step: a large
-- envelope holds its Redis for one chunk at a time, not for all its
-- packets at once.
--
-- KEYS[1] the loader's staging list (Keys.Staging): its own token, so two
--         loaders of one envelope never add to one list
-- ARGV[1] offset, how many packets the loader staged before this chunk
-- ARGV[2] milliseconds the list lives unless load.lua takes it (a loader
--         that stops half-way leaves nothing behind for long)
-- ARGV[3 ..] the chunk's packets, "<packet>:<amount>", in pool order
--
-- Reply {code}:
--   STAGED       the list holds the chunk after the offset's packets
--   OUT_OF_STEP  the list does not hold the offset's packets (it expired,
--                its Redis lost it, or a chunk's reply was lost): nothing
--                changed, and the load must start again
-- Arguments that are not what this says are an error, before any write.
local STAGED, OUT_OF_STEP = 0, 1

local offset, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
local n = #ARGV - 2
if not offset or offset < 0 or offset ~= math.floor(offset) or not ttl or ttl < 1
    or ttl ~= math.floor(ttl) or n < 1 then
  return redis.error_reply('stage: bad arguments')
end
if redis.call('LLEN', KEYS[1]) ~= offset then
  return {OUT_OF_STEP}
end
-- unpack() is bounded by the Lua stack: push in chunks.
for i = 3, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('PEXPIRE', KEYS[1], ttl)
return {STAGED}
