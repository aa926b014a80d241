-- Replace an envelope's state with what PostgreSQL holds (an operator's
-- recovery of a suspended envelope): the claims PostgreSQL knows, so their
-- users can only repeat, and the packets nobody claimed.
--
-- KEYS[1] meta hash of the envelope
-- KEYS[2] pool list of the envelope
-- KEYS[3] claims hash of the envelope
-- KEYS[4] recipients set of the envelope
-- ARGV[1] expires, unix milliseconds
-- ARGV[2] packet count
-- ARGV[3] total cents, at most 2^53 - 1
-- ARGV[4] grabbed cents (the claimed cents in PostgreSQL), at most the total
-- ARGV[5] n, the number of claims
-- ARGV[6] starts, unix milliseconds, or 0 for none
-- ARGV[7] password digest, or '' for none
-- ARGV[8] r, the number of recipients that follow (0: anyone may grab)
-- ARGV[9 .. 8+r] recipients
-- ARGV[9+r .. 8+r+2n] user, "<packet>:<amount>:<grabbed_ms>:<order_no>" pairs
-- ARGV[9+r+2n ..] packets not claimed, "<packet>:<amount>"
--
-- Reply {code}: RELOADED, or NOT_SUSPENDED when the meta is there and not
-- suspended (the operator's recovery suspends it first, so grants have
-- stopped): nothing changed. Arguments that are not what this says are an
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
if not whole(ARGV[1], 0) or not count or not total or not grabbed or grabbed > total or not claims
    or not r or not whole(ARGV[6], 0)
    or 8 + r + 2 * claims > #ARGV or claims + #ARGV - 8 - r - 2 * claims ~= count then
  return redis.error_reply('reload: bad arguments')
end
-- Read first: a meta of another type fails here, before any write.
local status = redis.call('HGET', KEYS[1], 'status')
if status and status ~= 'suspended' then
  return {NOT_SUSPENDED}
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
local first = 9 + r + 2 * claims
-- unpack() is bounded by the Lua stack: write in chunks. The keys were just
-- deleted, so no write can fail on their type.
for i = 9, 8 + r, 1000 do
  redis.call('SADD', KEYS[4], unpack(ARGV, i, math.min(i + 999, 8 + r)))
end
for i = 9 + r, first - 1, 1000 do
  redis.call('HSET', KEYS[3], unpack(ARGV, i, math.min(i + 999, first - 1)))
end
for i = first, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('HSET', KEYS[1], 'status', 'open', 'expires', ARGV[1],
  'count', ARGV[2], 'total', ARGV[3], 'grabbed_cents', ARGV[4],
  'starts', ARGV[6], 'password', ARGV[7], 'recipients', r)
return {RELOADED}
