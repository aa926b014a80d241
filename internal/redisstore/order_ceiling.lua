-- Raise the ceiling of a shard's order numbers of a day, after the range
-- (old, new] of its counter was reserved in PostgreSQL, or fence the counter
-- after this Redis changed.
--
-- KEYS[1] the shard's order-number hash of the day:
--           counter   the last counter value handed out
--           ceiling   the highest counter value PostgreSQL has reserved for
--                     this Redis to hand out
--           identity  master_replid of the Redis that set the ceiling
-- ARGV[1] old: the reservation's start (reserved_upto before it)
-- ARGV[2] new: its end (reserved_upto after it)
-- ARGV[3] the identity the caller was told to fence for (FENCE below), and
--         the reservation was made after it was told; '' for a raise
-- ARGV[4] lifetime of the hash in seconds, renewed here
--
-- Every counter value a Redis ever handed out is at most a ceiling some
-- reservation set, hence at most reserved_upto in PostgreSQL at that time.
--
-- With the identity stored being this Redis's, the counter is this Redis's
-- own and goes on: the range extends the ceiling when it starts there; a
-- range that starts above it was preceded by ranges reserved for someone
-- else (another Redis, in a failover's split brain), and the counter skips
-- to the range's start so it never walks through them.
--
-- Otherwise (another identity, none, or a hash that is not numbers), this
-- Redis may hold older data than the one that answered the last numbers:
-- only a reservation made after this identity was seen can fence it, by
-- moving the counter to old, above every number answered before (by any
-- Redis). A raise is refused with FENCE and the caller reserves again.
--
-- Reply:
--   {RAISED, {counter, ceiling}}  the hash now (also after a fence)
--   {FENCE, identity}             nothing changed; reserve again and call
--                                 with ARGV[3] = identity
local RAISED, FENCE = 0, 1

local exact = 9007199254740991
local function whole(v, lo)
  local n = tonumber(v)
  if n and n == math.floor(n) and n >= lo and n <= exact then
    return n
  end
  return nil
end

local old, new, ttl = whole(ARGV[1], 0), whole(ARGV[2], 1), whole(ARGV[4], 1)
if not old or not new or old >= new or not ttl then
  return redis.error_reply('order_ceiling: bad arguments')
end
local identity = string.match(redis.call('INFO', 'REPLICATION'), 'master_replid:(%w+)')
local h = redis.call('HMGET', KEYS[1], 'counter', 'ceiling', 'identity')
local counter, ceiling = whole(h[1], 0), whole(h[2], 0)
if counter and ceiling and h[3] == identity then
  if old > ceiling then
    counter = math.max(counter, old)
  end
  ceiling = math.max(ceiling, new)
elseif ARGV[3] == identity then
  counter = math.max(counter or 0, old)
  ceiling = math.max(ceiling or 0, new)
else
  return {FENCE, identity}
end
-- A full Redis (maxmemory, noeviction) refuses a script's first write that
-- may grow memory, and no write after another: EXPIRE, which it never
-- refuses, goes first (on a hash that does not exist yet it changes
-- nothing), so the range PostgreSQL just reserved is never lost to a full
-- Redis, and grabs do not reserve range after range while it is full.
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('HSET', KEYS[1], 'counter', counter, 'ceiling', ceiling, 'identity', identity)
redis.call('EXPIRE', KEYS[1], ttl)
return {RAISED, {counter, ceiling}}
