-- Load an envelope's packets, then its meta, once.
--
-- KEYS[1] meta hash of the envelope
-- KEYS[2] pool list of the envelope
-- KEYS[3] claims hash of the envelope
-- KEYS[4] epoch of the envelope's shard
-- ARGV[1] expires, unix milliseconds
-- ARGV[2] packet count
-- ARGV[3] total cents
-- ARGV[4] the shard epoch the caller last checked, or "" to load regardless
--         (a creator loading an envelope it has just written, which nobody
--         can have been offered yet)
-- ARGV[5..] packets, "<packet>:<amount>"
--
-- Reply:
--   1 loaded now
--   0 already loaded: nothing changed (loading is idempotent)
--  -1 a pool or claims exist without meta: state was partly lost, so loading
--     could offer a packet twice; nothing changed
--  -2 the shard's epoch is not ARGV[4]: the shard lost its data since the
--     caller checked, so the envelope may have been offered before; nothing
--     changed
--  -3 the envelope was given up (failed) or suspended meanwhile: it must not
--     be marked loaded
if ARGV[4] ~= '' and redis.call('GET', KEYS[4]) ~= ARGV[4] then
  return -2
end
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'failed' or status == 'suspended' then
  return -3
end
if status then
  return 0
end
if redis.call('EXISTS', KEYS[2], KEYS[3]) > 0 then
  return -1
end
-- unpack() is bounded by the Lua stack: push in chunks.
for i = 5, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('HSET', KEYS[1], 'status', 'open', 'expires', ARGV[1],
  'count', ARGV[2], 'total', ARGV[3], 'grabbed_cents', 0)
return 1
