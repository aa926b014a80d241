-- Grab one packet of an envelope for each of several users, atomically. The
-- grabs are decided in order, each exactly as if it ran alone after the ones
-- before it, but each envelope's state is read once and written once per
-- call: a hot envelope's grabs arriving together (see coalesce.go) cost a
-- handful of commands, not six each. All keys belong to one shard, so they
-- share a hash tag.
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
local n = #ARGV / 4

-- The envelopes of this call, in order of first appearance, and their users.
local envs, list = {}, {}
for i = 1, n do
  local k = 3 * i - 1
  local e = envs[KEYS[k]]
  if not e then
    e = {meta = KEYS[k], pool = KEYS[k + 1], claims = KEYS[k + 2], users = {}, seen = {},
         attempting = {}, granted = {}, need = 0, next = 0, cents = 0, writes = {}}
    envs[KEYS[k]] = e
    list[#list + 1] = e
  end
  local user = ARGV[4 * i - 3]
  if not e.seen[user] then
    e.seen[user] = true
    e.users[#e.users + 1] = user
  end
end

-- Read each envelope's claims of these users and its meta, once.
for _, e in ipairs(list) do
  local held = redis.call('HMGET', e.claims, unpack(e.users))
  e.held = {}
  for j, user in ipairs(e.users) do
    e.held[user] = held[j]
  end
  local meta = redis.call('HMGET', e.meta, 'status', 'expires')
  e.status, e.expires = meta[1], tonumber(meta[2])
end

-- What grab.lua of one grab would refuse with, for a grab at now: 0 if none.
local function refusal(e, now)
  if not e.status then
    return 2
  elseif e.status == 'suspended' then
    return 5
  elseif e.status ~= 'open' or now > e.expires then
    return 3
  end
  return 0
end

-- First pass: which grabs take a packet from the pool. A user's second
-- attempt in this call repeats the first if that one is granted; otherwise
-- it is refused as the first was, or for its own time.
local plan = {}
for i = 1, n do
  local e = envs[KEYS[3 * i - 1]]
  local user, now = ARGV[4 * i - 3], tonumber(ARGV[4 * i - 2])
  local code = refusal(e, now)
  if e.held[user] then
    plan[i] = 'held'
  elseif e.attempting[user] then
    plan[i] = {again = code == 0 and 4 or code}
  elseif code ~= 0 then
    plan[i] = code
  else
    plan[i] = 'pop'
    e.attempting[user] = true
    e.need = e.need + 1
  end
end

-- Take every packet needed in one pop per envelope: the same packets, in the
-- same order, as one pop per grab.
for _, e in ipairs(list) do
  e.packets = {}
  if e.need > 0 then
    e.packets = redis.call('RPOP', e.pool, e.need) or {}
  end
end

-- Second pass: answer in order.
local reply, queued = {}, {}
for i = 1, n do
  local e = envs[KEYS[3 * i - 1]]
  local user, p = ARGV[4 * i - 3], plan[i]
  local code, claim = p, ''
  if p == 'held' then
    code, claim = 1, e.held[user]
  elseif p == 'pop' then
    e.next = e.next + 1
    local packet = e.packets[e.next]
    if packet then
      claim = packet .. ':' .. ARGV[4 * i - 2] .. ':' .. ARGV[4 * i]
      code = 0
      e.granted[user] = claim
      e.writes[#e.writes + 1] = user
      e.writes[#e.writes + 1] = claim
      e.cents = e.cents + tonumber(string.match(packet, ':(%d+)$'))
      queued[#queued + 1] = ARGV[4 * i - 1] .. ':' .. claim .. ':' .. user
    else
      code = 4
    end
  elseif type(p) == 'table' then
    if e.granted[user] then
      code, claim = 1, e.granted[user]
    else
      code = p.again
    end
  end
  reply[2 * i - 1] = code
  reply[2 * i] = claim
end

-- Write once per envelope, and the queue once.
for _, e in ipairs(list) do
  if #e.writes > 0 then
    redis.call('HSET', e.claims, unpack(e.writes))
    redis.call('HINCRBY', e.meta, 'grabbed_cents', e.cents)
  end
end
if #queued > 0 then
  redis.call('LPUSH', KEYS[1], unpack(queued))
end
return reply
