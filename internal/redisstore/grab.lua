-- Grab one packet of an envelope for a user, atomically.
--
-- KEYS[1] meta hash of the envelope
-- KEYS[2] pool list of the envelope
-- KEYS[3] claims hash of the envelope
-- KEYS[4] consumed list of the envelope's shard
-- ARGV[1] user id
-- ARGV[2] now, unix milliseconds
-- ARGV[3] envelope id
-- ARGV[4] order number for this grab, used only if a packet is granted
--
-- Reply {code} or {code, claim}; claim is "<packet>:<amount>:<grabbed_ms>:<order_no>".
--   0 granted: claim is new, recorded and queued for the flusher
--   1 repeat: the user's earlier claim (answered even after expiry)
--   2 not loaded: no meta (never loaded, or Redis lost it)
--   3 closed: the envelope is closed (settling or settled), failed, or now is
--     past its expiry
--   4 sold out: no packet left
--   5 suspended: Redis lost state of this envelope; an operator decides
local claim = redis.call('HGET', KEYS[3], ARGV[1])
if claim then
  return {1, claim}
end
local meta = redis.call('HMGET', KEYS[1], 'status', 'expires')
if not meta[1] then
  return {2}
end
if meta[1] == 'suspended' then
  return {5}
end
if meta[1] ~= 'open' or tonumber(ARGV[2]) > tonumber(meta[2]) then
  return {3}
end
local packet = redis.call('RPOP', KEYS[2])
if not packet then
  return {4}
end
claim = packet .. ':' .. ARGV[2] .. ':' .. ARGV[4]
redis.call('HSET', KEYS[3], ARGV[1], claim)
redis.call('LPUSH', KEYS[4], ARGV[3] .. ':' .. claim .. ':' .. ARGV[1])
redis.call('HINCRBY', KEYS[1], 'grabbed_cents', string.match(packet, ':(%d+)$'))
return {0, claim}
