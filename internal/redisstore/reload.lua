-- Replace an envelope's state with what PostgreSQL holds (an operator's
-- recovery of a suspended envelope): the claims PostgreSQL knows, so their
-- users can only repeat, and the packets nobody claimed.
--
-- KEYS[1] meta hash of the envelope
-- KEYS[2] pool list of the envelope
-- KEYS[3] claims hash of the envelope
-- ARGV[1] expires, unix milliseconds
-- ARGV[2] packet count
-- ARGV[3] total cents
-- ARGV[4] grabbed cents (the claimed cents in PostgreSQL)
-- ARGV[5] n, the number of claims that follow
-- ARGV[6 .. 5+2n] user, "<packet>:<amount>:<grabbed_ms>:<order_no>" pairs
-- ARGV[6+2n ..] packets not claimed, "<packet>:<amount>"
--
-- Reply: 1, or 0 when the meta is not suspended (the operator's recovery
-- suspends it first, so grants have stopped): nothing changed.
local status = redis.call('HGET', KEYS[1], 'status')
if status and status ~= 'suspended' then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
local first = 6 + 2 * tonumber(ARGV[5])
-- unpack() is bounded by the Lua stack: write in chunks.
for i = 6, first - 1, 1000 do
  redis.call('HSET', KEYS[3], unpack(ARGV, i, math.min(i + 999, first - 1)))
end
for i = first, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('HSET', KEYS[1], 'status', 'open', 'expires', ARGV[1],
  'count', ARGV[2], 'total', ARGV[3], 'grabbed_cents', ARGV[4])
return 1
