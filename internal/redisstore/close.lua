-- Close an envelope so no grab is granted after this, or suspend it.
--
-- KEYS[1] meta hash of the envelope
-- KEYS[2] pool list of the envelope
-- KEYS[3] claims hash of the envelope
-- ARGV[1] the new status: "closed" (settling) or "suspended"
-- ARGV[2] when closing: lifetime of the meta and claims in milliseconds, so
--         repeat grabs are answered for a while and then the keys go
--
-- Reply {0} when there is no meta, else
--   {1, status before, grabbed_cents, claims count, pool length before}
--
-- Closing drops the pool: its packets are about to be refunded. Closing a
-- closed envelope only renews the lifetime. A suspended envelope is left as
-- it is (an operator decides), and one that failed to load stays failed.
-- Suspending an envelope Redis holds nothing of leaves a suspended meta, so
-- that a late load (a slow creator) cannot open it again.
local meta = redis.call('HMGET', KEYS[1], 'status', 'grabbed_cents')
local before = meta[1]
if not before then
  if ARGV[1] == 'suspended' then
    redis.call('HSET', KEYS[1], 'status', 'suspended', 'grabbed_cents', 0)
  end
  return {0}
end
local pool = redis.call('LLEN', KEYS[2])
local claims = redis.call('HLEN', KEYS[3])
local reply = {1, before, tonumber(meta[2]) or 0, claims, pool}
if before ~= 'open' and before ~= 'closed' then
  return reply
end
if ARGV[1] == 'suspended' then
  redis.call('HSET', KEYS[1], 'status', 'suspended')
  return reply
end
redis.call('HSET', KEYS[1], 'status', 'closed')
redis.call('DEL', KEYS[2])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[3], ARGV[2])
return reply
