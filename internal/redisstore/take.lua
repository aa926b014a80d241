-- Hand the flusher a batch of claims: what is in flight already (an earlier
-- flusher stopped before acknowledging it), else up to ARGV[1] of the oldest
-- consumed claims, moved into the in-flight list.
--
-- KEYS[1] consumed list of the shard
-- KEYS[2] inflight list of the shard
-- ARGV[1] batch size, at least 1
--
-- Reply {TAKEN, claims}: the in-flight claims, oldest first; empty when
-- nothing waits.
local TAKEN = 0

local size = tonumber(ARGV[1])
if not size or size < 1 or size ~= math.floor(size) then
  return redis.error_reply('take: bad batch size')
end
-- Read first: LRANGE fails on a key of another type before anything moved.
local inflight = redis.call('LRANGE', KEYS[2], 0, -1)
if #inflight > 0 then
  return {TAKEN, inflight}
end
local items = redis.call('RPOP', KEYS[1], size)
if not items then
  return {TAKEN, {}}
end
-- unpack() is bounded by the Lua stack: push in chunks.
for i = 1, #items, 1000 do
  redis.call('RPUSH', KEYS[2], unpack(items, i, math.min(i + 999, #items)))
end
return {TAKEN, items}
