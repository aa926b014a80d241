-- Close an envelope so no grab is granted after this, or suspend it.
--
-- KEYS[1] meta hash of the envelope
-- KEYS[2] pool list of the envelope
-- KEYS[3] claims hash of the envelope as it was before buckets (Keys.Claims)
-- KEYS[4] recipients set of the envelope (dropped once closed: a closed
--         envelope grants nothing, so it is never read again)
-- KEYS[5 ..] the envelope's claim buckets, all of them (suspending keeps
--         them, and the meta and claims, for good: a closed envelope's had a
--         lifetime, and an operator decides a suspended one from them)
-- ARGV[1] the new status: 'closed' (settling) or 'suspended'
-- ARGV[2] lifetime of the meta and claims in milliseconds once closed, so
--         repeat grabs are answered for a while and then the keys go
--
-- Reply:
--   {NO_META}  there was no meta
--   {FOUND, {status before, grabbed_cents, claims count, pool length before}}
--   the claims counted by the meta's "claimed" (the buckets) and the length
--   of the one hash of an envelope loaded before buckets
--
-- Closing drops the pool: its packets are about to be refunded. Closing a
-- closed envelope only renews the lifetime. A suspended envelope is left as
-- it is (an operator decides), and one that failed to load stays failed.
-- Suspending an envelope Redis holds nothing of leaves a suspended meta, so
-- that a late load (a slow creator) cannot open it again.
local NO_META, FOUND = 0, 1

local to, ttl = ARGV[1], tonumber(ARGV[2])
if (to ~= 'closed' and to ~= 'suspended') or not ttl or ttl < 1 or ttl ~= math.floor(ttl) then
  return redis.error_reply('close: bad arguments')
end
-- Read everything first: a key of another type fails here, before any write.
local meta = redis.call('HMGET', KEYS[1], 'status', 'grabbed_cents', 'claimed')
local pool = redis.call('LLEN', KEYS[2])
local claims = redis.call('HLEN', KEYS[3]) + (tonumber(meta[3]) or 0)
-- A full Redis (maxmemory, noeviction) refuses a script's first write that
-- may grow memory (HSET), and no write after another: each path below
-- begins with a write it never refuses (PERSIST, DEL), so that a close,
-- which frees the pool, and a suspension, which stops grants, go through
-- when Redis is full.
local before = meta[1]
if not before then
  if to == 'suspended' then
    redis.call('PERSIST', KEYS[1]) -- a suspended meta is kept, as below
    redis.call('HSET', KEYS[1], 'status', 'suspended', 'grabbed_cents', 0)
  end
  return {NO_META}
end
local reply = {FOUND, {before, tonumber(meta[2]) or 0, claims, pool}}
if before ~= 'open' and before ~= 'closed' then
  return reply
end
if to == 'suspended' then
  redis.call('PERSIST', KEYS[1])
  redis.call('HSET', KEYS[1], 'status', 'suspended')
  redis.call('PERSIST', KEYS[3])
  for i = 5, #KEYS do
    redis.call('PERSIST', KEYS[i])
  end
  return reply
end
redis.call('DEL', KEYS[2], KEYS[4])
redis.call('HSET', KEYS[1], 'status', 'closed')
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[3], ttl)
for i = 5, #KEYS do
  redis.call('PEXPIRE', KEYS[i], ttl)
end
return reply
