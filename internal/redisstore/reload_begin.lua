-- Begin replacing an envelope's state with what PostgreSQL holds (an
-- operator's recovery of a suspended envelope). The reload goes in steps so
-- that no call holds Redis for all of a large envelope: this one drops what
-- Redis held and marks the meta with the reloader's token;
-- reload_claims.lua then writes the claims PostgreSQL knows a chunk at a
-- time, stage.lua stages the packets nobody claimed, and reload.lua opens
-- the envelope. Until then the meta says suspended: every grab is refused
-- but a holder's repeat, answered with the claim written back.
--
-- KEYS[1] meta hash of the envelope
-- KEYS[2] pool list of the envelope
-- KEYS[3] claims hash of the envelope as it was before buckets (Keys.Claims):
--         dropped, the claims go to the buckets
-- KEYS[4] recipients set of the envelope
-- KEYS[5 ..] the envelope's claim buckets, all of them (Keys.ClaimBuckets)
-- ARGV[1] the reloader's token (random): a later step goes on only while
--         the meta carries it
--
-- Reply {code}: BEGUN, or NOT_SUSPENDED when the meta is neither suspended
-- nor forgotten, or not there: nothing changed. The operator's recovery
-- suspends the envelope first, which leaves a suspended meta however
-- little Redis held, or finds the forgotten one of a refund that stopped
-- half-way (PostgreSQL still suspended, which it checked): either way
-- grants have stopped. A missing meta means something else went on
-- meanwhile. A forgotten meta becomes suspended, for good (PostgreSQL says
-- so too): the claims written next must not outlive it, nor a reload that
-- stops half-way leave them behind without it.
local BEGUN, NOT_SUSPENDED = 0, 1

if #KEYS < 5 or not ARGV[1] or ARGV[1] == '' then
  return redis.error_reply('reload_begin: bad arguments')
end
-- Read first: a meta of another type fails here, before any write.
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'suspended' and status ~= 'forgotten' then
  return {NOT_SUSPENDED}
end
-- UNLINK: a large pool or claims hash is freed off Redis's main thread.
for i = 2, #KEYS, 1000 do
  redis.call('UNLINK', unpack(KEYS, i, math.min(i + 999, #KEYS)))
end
if status == 'forgotten' then
  -- As a suspension of an envelope Redis held nothing of leaves it.
  redis.call('HSET', KEYS[1], 'grabbed_cents', 0)
end
redis.call('HSET', KEYS[1], 'status', 'suspended', 'reloading', ARGV[1], 'reloaded_claims', 0)
redis.call('PERSIST', KEYS[1])
return {BEGUN}
