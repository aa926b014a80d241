-- Replace an envelope's state with what PostgreSQL holds (an operator's
-- recovery of a suspended envelope): the claims PostgreSQL knows, so their
-- users can only repeat, and the packets nobody claimed.
--
-- KEYS[1] meta hash of the envelope
-- KEYS[2] pool list of the envelope
-- KEYS[3] claims hash of the envelope as it was before buckets (Keys.Claims):
--         deleted, the claims go to the buckets
-- KEYS[4] recipients set of the envelope
-- KEYS[5 ..] the envelope's claim buckets, all of them (Keys.ClaimBuckets)
-- ARGV[1] expires, unix milliseconds
-- ARGV[2] packet count
-- ARGV[3] total cents, at most 2^53 - 1
-- ARGV[4] grabbed cents (the claimed cents in PostgreSQL), at most the total
-- ARGV[5] n, the number of claims
-- ARGV[6] starts, unix milliseconds, or 0 for none
-- ARGV[7] password digest, or '' for none
-- ARGV[8] r, the number of recipients that follow (0: anyone may grab)
-- ARGV[9 .. 8+r] recipients
-- ARGV[9+r .. 8+r+3n] the claims: bucket (0-based, Keys.BucketOf), user,
--                     claim (compact, codec.go)
-- ARGV[9+r+3n ..] packets not claimed, "<packet>:<amount>"
--
-- Reply {code}: RELOADED, or NOT_SUSPENDED when the meta is neither
-- suspended nor forgotten, or not there: nothing changed. The operator's
-- recovery suspends the envelope first, which leaves a suspended meta
-- however little Redis held, or finds the forgotten one of a refund that
-- stopped half-way (PostgreSQL still suspended, which it checked): either
-- way grants have stopped. A missing meta means something else went on
-- meanwhile. Arguments that are not what this says are an
-- error, before any write.
local RELOADED, NOT_SUSPENDED = 0, 1

local exact = 9007199254740991
local function whole(v, lo)
  local n = tonumber(v)
  if n and n == math.floor(n) and n >= lo and n <= exact then
    return n
  end
  return nil
end

local count, total, grabbed, claims = whole(ARGV[2], 1), whole(ARGV[3], 1), whole(ARGV[4], 0), whole(ARGV[5], 0)
local r = whole(ARGV[8], 0)
local buckets = #KEYS - 4
if not whole(ARGV[1], 0) or not count or not total or not grabbed or grabbed > total or not claims
    or not r or not whole(ARGV[6], 0) or buckets < 1
    or 8 + r + 3 * claims > #ARGV or claims + #ARGV - 8 - r - 3 * claims ~= count then
  return redis.error_reply('reload: bad arguments')
end
local first = 9 + r + 3 * claims
for i = 9 + r, first - 1, 3 do
  local b = whole(ARGV[i], 0)
  if not b or b >= buckets then
    return redis.error_reply('reload: bad bucket')
  end
end
-- Read first: a meta of another type fails here, before any write.
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'suspended' and status ~= 'forgotten' then
  return {NOT_SUSPENDED}
end
for i = 1, #KEYS, 1000 do
  redis.call('DEL', unpack(KEYS, i, math.min(i + 999, #KEYS)))
end
-- unpack() is bounded by the Lua stack: write in chunks. The keys were just
-- deleted, so no write can fail on their type.
for i = 9, 8 + r, 1000 do
  redis.call('SADD', KEYS[4], unpack(ARGV, i, math.min(i + 999, 8 + r)))
end
for i = 9 + r, first - 1, 3 do
  redis.call('HSET', KEYS[5 + tonumber(ARGV[i])], ARGV[i + 1], ARGV[i + 2])
end
for i = first, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('HSET', KEYS[1], 'status', 'open', 'expires', ARGV[1],
  'count', ARGV[2], 'total', ARGV[3], 'grabbed_cents', ARGV[4],
  'starts', ARGV[6], 'password', ARGV[7], 'recipients', r, 'buckets', buckets, 'claimed', claims)
return {RELOADED}
