-- Hand the flusher a batch of claims: what is in flight already (an earlier
-- flusher stopped before acknowledging it), else up to ARGV[1] of the oldest
-- consumed claims, moved into the in-flight list.
--
-- KEYS[1] consumed list of the shard
-- KEYS[2] inflight list of the shard
-- ARGV[1] batch size
--
-- Reply: the in-flight claims, oldest first; empty when nothing waits.
local inflight = redis.call('LRANGE', KEYS[2], 0, -1)
if #inflight > 0 then
  return inflight
end
local items = redis.call('RPOP', KEYS[1], ARGV[1])
if not items then
  return {}
end
-- unpack() is bounded by the Lua stack: push in chunks.
for i = 1, #items, 1000 do
  redis.call('RPUSH', KEYS[2], unpack(items, i, math.min(i + 999, #items)))
end
return items
