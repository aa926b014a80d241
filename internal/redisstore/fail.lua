-- Give up an envelope that never finished loading: leave a 'failed' meta so
-- that a late load (a slow creator) changes nothing and no grab is granted.
--
-- KEYS[1] meta hash of the envelope
-- KEYS[2] pool list of the envelope
-- KEYS[3] claims hash of the envelope as it was before buckets (Keys.Claims)
-- KEYS[4] epoch of the envelope's shard
-- KEYS[5 ..] the envelope's claim buckets, all of them
-- ARGV[1] lifetime of the failed meta in milliseconds
-- ARGV[2] the shard epoch the caller last checked
-- ARGV[3] the envelope's expiry, unix milliseconds; ARGV[4] its total
--         cents (as load.lua takes them)
--
-- Reply {code}:
--   FAILED        the envelope was never loaded, nothing was offered; it is
--                 failed now (or was already: giving up can be repeated)
--   WAS_LOADED    it was loaded (meta present): it may have been offered,
--                 nothing changed
--   INCONSISTENT  a pool or claims exist without meta: state was partly lost
--   EPOCH_CHANGED the shard's epoch is not ARGV[2]: a missing meta proves
--                 nothing
--   SUSPENDED     it is suspended (a suspension PostgreSQL may not have
--                 recorded yet): an operator's, nothing changed
--   OTHER         a meta of another envelope holds the id (load.lua's
--                 OTHER): this one was never loaded here; nothing changed
local FAILED, WAS_LOADED, INCONSISTENT, EPOCH_CHANGED, SUSPENDED, OTHER = 0, 1, 2, 3, 4, 5

local ttl = tonumber(ARGV[1])
if not ttl or ttl < 1 or ttl ~= math.floor(ttl) then
  return redis.error_reply('fail: bad lifetime')
end
if redis.call('GET', KEYS[4]) ~= ARGV[2] then
  return {EPOCH_CHANGED}
end
local meta = redis.call('HMGET', KEYS[1], 'status', 'expires', 'total')
local status = meta[1]
if meta[2] and (meta[2] ~= ARGV[3] or meta[3] ~= ARGV[4]) then
  return {OTHER}
end
if status == 'failed' then
  return {FAILED}
end
if status == 'suspended' then
  return {SUSPENDED}
end
if status then
  return {WAS_LOADED}
end
if redis.call('EXISTS', KEYS[2], KEYS[3]) > 0 then
  return {INCONSISTENT}
end
for i = 5, #KEYS, 1000 do
  if redis.call('EXISTS', unpack(KEYS, i, math.min(i + 999, #KEYS))) > 0 then
    return {INCONSISTENT}
  end
end
-- A full Redis refuses a script's first write that may grow memory (HSET),
-- and no write after another: PERSIST (of a meta that does not exist: it
-- changes nothing) goes first, so an envelope can be given up while Redis
-- is full.
redis.call('PERSIST', KEYS[1])
redis.call('HSET', KEYS[1], 'status', 'failed', 'grabbed_cents', 0)
redis.call('PEXPIRE', KEYS[1], ttl)
return {FAILED}
