-- Drop a shard's in-flight batch once it is durable, but only if the list
-- still holds exactly that batch: a flusher that lost its lease on the shard
-- (its batch re-applied, acknowledged and replaced by the next owner) must
-- not delete the next owner's batch. The batch's entries that could not be
-- written (malformed, or refused by PostgreSQL) go to the shard's rejected
-- list in the same step: a batch is acknowledged once, so they are kept
-- once, however often it was taken and written before.
--
-- KEYS[1] inflight list of the shard
-- KEYS[2] rejected list of the shard
-- ARGV[1] the batch's length
-- ARGV[2] its first entry
-- ARGV[3] its last entry
-- ARGV[4..] the entries to keep in the rejected list
--
-- Reply {code}: DROPPED, or OTHER when the list holds something else (left
-- alone, nothing kept: the batch's new owner keeps them).
local DROPPED, OTHER = 0, 1

local size = tonumber(ARGV[1])
if not size or size < 1 then
  return redis.error_reply('ack: bad batch length')
end
if redis.call('LLEN', KEYS[1]) == size
    and redis.call('LINDEX', KEYS[1], 0) == ARGV[2]
    and redis.call('LINDEX', KEYS[1], -1) == ARGV[3] then
  redis.call('DEL', KEYS[1])
  -- In chunks: unpack gives at most a few thousand values at once, and a
  -- batch may reject all of its entries.
  for i = 4, #ARGV, 1000 do
    redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
  end
  return {DROPPED}
end
return {OTHER}
