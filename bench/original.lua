-- The grab script of the source design, kept as a same-run reference for
-- bench/run.sh (never used by the service). Packets are cjson-encoded objects
-- in a list; a "consumed users" hash de-duplicates.
--
-- KEYS[1] pool list: packets not yet grabbed, e.g. {"id":17,"money":87}
-- KEYS[2] consumed list: grabbed packets, with the user set in them
-- KEYS[3] consumed users hash: user -> grabbed packet
-- ARGV[1] user id
--
-- Reply: the grabbed packet as JSON with "userId" set, or nil when the user
-- already grabbed or the pool is empty.
if redis.call('HEXISTS', KEYS[3], ARGV[1]) ~= 0 then
  return nil
end
local packet = redis.call('RPOP', KEYS[1])
if not packet then
  return nil
end
local p = cjson.decode(packet)
p['userId'] = ARGV[1]
local grabbed = cjson.encode(p)
redis.call('HSET', KEYS[3], ARGV[1], grabbed)
redis.call('LPUSH', KEYS[2], grabbed)
return grabbed
