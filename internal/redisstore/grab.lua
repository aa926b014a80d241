-- Grab one packet of an envelope for each of several users, atomically, in
-- order: each grab is decided exactly as if it ran alone, after the ones
-- before it. Grabs arriving together share one call (see coalesce.go); all
-- keys belong to one shard, so they share a hash tag.
--
-- KEYS[1]       consumed list of the shard
-- KEYS[3i-1]    meta hash of grab i's envelope     (i = 1..n)
-- KEYS[3i]      pool list of grab i's envelope
-- KEYS[3i+1]    claims hash of grab i's envelope
-- ARGV[4i-3]    user id of grab i
-- ARGV[4i-2]    now, unix milliseconds
-- ARGV[4i-1]    envelope id
-- ARGV[4i]      order number for the grab, used only if a packet is granted
--
-- Reply {code_1, claim_1, ..., code_n, claim_n}; claim is
-- "<packet>:<amount>:<grabbed_ms>:<order_no>", or "" with no packet.
--   0 granted: claim is new, recorded and queued for the flusher
--   1 repeat: the user's earlier claim (answered even after expiry)
--   2 not loaded: no meta (never loaded, or Redis lost it)
--   3 closed: the envelope is closed (settling or settled), failed, or now is
--     past its expiry
--   4 sold out: no packet left
--   5 suspended: Redis lost state of this envelope; an operator decides
local function grab(meta_key, pool_key, claims_key, user, now, envelope, order_no)
  local claim = redis.call('HGET', claims_key, user)
  if claim then
    return 1, claim
  end
  local meta = redis.call('HMGET', meta_key, 'status', 'expires')
  if not meta[1] then
    return 2, ''
  end
  if meta[1] == 'suspended' then
    return 5, ''
  end
  if meta[1] ~= 'open' or tonumber(now) > tonumber(meta[2]) then
    return 3, ''
  end
  local packet = redis.call('RPOP', pool_key)
  if not packet then
    return 4, ''
  end
  claim = packet .. ':' .. now .. ':' .. order_no
  redis.call('HSET', claims_key, user, claim)
  redis.call('LPUSH', KEYS[1], envelope .. ':' .. claim .. ':' .. user)
  redis.call('HINCRBY', meta_key, 'grabbed_cents', string.match(packet, ':(%d+)$'))
  return 0, claim
end

local reply = {}
for i = 1, #ARGV / 4 do
  local k, a = 3 * i - 1, 4 * i - 3
  local code, claim = grab(KEYS[k], KEYS[k + 1], KEYS[k + 2], ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3])
  reply[2 * i - 1] = code
  reply[2 * i] = claim
end
return reply
