-- Grab one packet of an envelope for each of several users, atomically, and
-- number every grant. The grabs are decided in order, each exactly as if it
-- ran alone after the ones before it, but each envelope's state is read once
-- and written once per call: a hot envelope's grabs arriving together (see
-- coalesce.go) cost a handful of commands, not six each. All keys belong to
-- one shard, so they share a hash tag.
--
-- KEYS[1]       consumed list of the shard
-- KEYS[2]       the shard's order-number hash of the day: counter, ceiling,
--               identity (see order_ceiling.lua)
-- KEYS[3i]      meta hash of grab i's envelope     (i = 1..n)
-- KEYS[3i+1]    pool list of grab i's envelope
-- KEYS[3i+2]    claims hash of grab i's envelope
-- ARGV[1]       the day, yyyyMMdd: the first 8 digits of every order number
-- ARGV[2]       width: digits of the per-day sequence after the date
-- ARGV[3]       shards: the stride of the shard's sequence numbers
-- ARGV[4]       offset: shard + 1, the shard's first sequence number
-- ARGV[5]       the largest counter whose sequence number fits the width
-- ARGV[3i+3]    user id of grab i
-- ARGV[3i+4]    now, unix milliseconds
-- ARGV[3i+5]    envelope id
--
-- Order numbers: the shard hands out counter values counter+1, counter+2,
-- ... up to the ceiling (set from PostgreSQL by order_ceiling.lua), only to
-- grants; counter value c is sequence number (c-1)*shards + offset, so the
-- shards' numbers interleave and never meet. The ceiling counts only while
-- the identity stored with it is this Redis's (master_replid, which changes
-- whenever Redis restarts or a replica is promoted): otherwise Redis may
-- have come back from older data, and numbers above the counter may already
-- have been answered.
--
-- Reply {code, {info, code_1, claim_1, ..., code_n, claim_n}}, claim being
-- "<packet>:<amount>:<grabbed_ms>:<order_no>", or "" with no packet. The
-- call's code says what became of the order numbers:
--   DONE       every grant got a number; info is how many are left under
--              the ceiling, or -1 when there is nothing to raise: no grab
--              needed one (not read), or the ceiling already covers the
--              width for the day
--   FENCE      the ceiling was not set by this Redis; info is its identity.
--              Grabs that needed a number are AWAITING; nothing was written
--   CEILING    the ceiling was reached; info is 0. The grabs it stopped are
--              AWAITING; the others were applied
--   EXHAUSTED  the width is used up for the day; info is 0. As CEILING
-- Each grab's code:
--   GRANTED    claim is new, recorded and queued for the flusher
--   REPEAT     the user's earlier claim (answered even after expiry)
--   NOT_LOADED no meta (never loaded, or Redis lost it)
--   CLOSED     the envelope is closed (settling or settled), failed, or now
--              is past its expiry
--   SOLD_OUT   no packet left
--   SUSPENDED  Redis lost state of this envelope; an operator decides
--   AWAITING   a packet is there but no order number (see the call's code);
--              nothing of it was taken: ask again
--   BAD_STATE  the envelope's Redis state fails a check (a meta or packet
--              that is not numbers, a total beyond exact integers, packets
--              worth more than is left); nothing of it was taken
--
-- Everything a write could fail on is checked before the first write, so an
-- error leaves nothing half done, for any envelope of the call.
local DONE, FENCE, CEILING, EXHAUSTED = 0, 1, 2, 3
local GRANTED, REPEAT, NOT_LOADED, CLOSED, SOLD_OUT, SUSPENDED, AWAITING, BAD_STATE = 0, 1, 2, 3, 4, 5, 6, 7

-- Integers up to 2^53 - 1 are exact in Lua's numbers and written as digits
-- when passed to Redis.
local exact = 9007199254740991

-- n as a whole number in [lo, exact], or nil.
local function whole(v, lo)
  local n = tonumber(v)
  if n and n == math.floor(n) and n >= lo and n <= exact then
    return n
  end
  return nil
end

local date, width, stride, offset, maxc = ARGV[1], whole(ARGV[2], 1), whole(ARGV[3], 1), whole(ARGV[4], 1), whole(ARGV[5], 0)
if not string.match(date, '^%d%d%d%d%d%d%d%d$') or not width or width > 18 or not stride or not offset or not maxc then
  return redis.error_reply('grab: bad order-number arguments')
end
local n = (#ARGV - 5) / 3
if n < 1 or n ~= math.floor(n) then
  return redis.error_reply('grab: ARGV is not 5 + 3 per grab')
end

-- The envelopes of this call, in order of first appearance, and their users.
local envs, list, now = {}, {}, {}
for i = 1, n do
  local k = 3 * i
  local e = envs[KEYS[k]]
  if not e then
    e = {meta = KEYS[k], pool = KEYS[k + 1], claims = KEYS[k + 2], users = {}, seen = {},
         attempting = {}, granted = {}, awaiting = {}, need = 0, next = 0, cents = 0, writes = {}}
    envs[KEYS[k]] = e
    list[#list + 1] = e
  end
  local user = ARGV[3 * i + 3]
  now[i] = whole(ARGV[3 * i + 4], 0)
  if user == '' or not now[i] then
    return redis.error_reply('grab: empty user or bad clock in grab ' .. i)
  end
  if not e.seen[user] then
    e.seen[user] = true
    e.users[#e.users + 1] = user
  end
end

-- Read each envelope's claims of these users and its meta, once, and check
-- the meta: everything the writes below add up must stay exact.
for _, e in ipairs(list) do
  local held = redis.call('HMGET', e.claims, unpack(e.users))
  e.held = {}
  for j, user in ipairs(e.users) do
    e.held[user] = held[j]
  end
  local meta = redis.call('HMGET', e.meta, 'status', 'expires', 'total', 'grabbed_cents')
  e.status = meta[1]
  if e.status then
    e.expires, e.total = whole(meta[2], 0), whole(meta[3], 1)
    e.grabbed = e.total and whole(meta[4], 0)
    e.badMeta = not (e.expires and e.grabbed and e.grabbed <= e.total)
  end
end

-- What a grab of one envelope at time t is refused with, or nil.
local function refusal(e, t)
  if not e.status then
    return NOT_LOADED
  elseif e.status == 'suspended' then
    return SUSPENDED
  elseif e.status ~= 'open' then
    return CLOSED
  elseif e.badMeta then
    return BAD_STATE
  elseif t > e.expires then
    return CLOSED
  end
  return nil
end

-- First pass: which grabs take a packet from the pool (plan: a refusal's
-- code, or one of these). A user's second
-- attempt in this call repeats the first if that one is granted; otherwise
-- it is answered as the first was, or refused for its own time.
local held, pop, again = -1, -2, -3
local plan = {}
for i = 1, n do
  local e = envs[KEYS[3 * i]]
  local user = ARGV[3 * i + 3]
  local code = refusal(e, now[i])
  if e.held[user] then
    plan[i] = held
  elseif e.attempting[user] then
    plan[i] = again
  elseif code then
    plan[i] = code
  else
    plan[i] = pop
    e.attempting[user] = true
    e.need = e.need + 1
  end
end

-- Read the packets the pops would take, without taking them: the last
-- `need` of the pool, in the order RPOP would hand them out. An envelope
-- whose packets fail a check is refused whole.
local wanted = 0
for _, e in ipairs(list) do
  e.tail, e.amounts, e.count = {}, {}, 0
  if e.need > 0 then
    e.tail = redis.call('LRANGE', e.pool, -e.need, -1)
    local sum, n = 0, #e.tail
    for k = 1, n do
      -- Digits only, so tonumber is a whole number; one too big for the
      -- total fails the sum below, before it can be inexact in a write.
      local id, amount = string.match(e.tail[n - k + 1], '^(%d+):(%d+)$')
      amount = tonumber(amount)
      if not amount or amount < 1 or #id > 15 then
        e.badPool = true
        break
      end
      sum = sum + amount
      e.amounts[k] = amount
    end
    if e.badPool or sum > e.total - e.grabbed then
      e.badPool = true
    else
      e.count = n
    end
    wanted = wanted + e.count
  end
end

-- The order numbers: read only when some grab will take a packet.
local counter, left, fence, info, full = 0, 0, false, -1, false
if wanted > 0 then
  local identity = string.match(redis.call('INFO', 'REPLICATION'), 'master_replid:(%w+)')
  local h = redis.call('HMGET', KEYS[2], 'counter', 'ceiling', 'identity')
  counter = whole(h[1], 0)
  local ceiling = whole(h[2], 0)
  if not counter or not ceiling or h[3] ~= identity then
    fence, counter, info = true, 0, identity
  else
    left = math.max(math.min(ceiling, maxc) - counter, 0)
    full = ceiling >= maxc
  end
end

-- Second pass: answer in order, numbering the grants.
local reply, queued, used, short = {}, {}, 0, false
local format = string.format('%%0%dd', width)
for i = 1, n do
  local e = envs[KEYS[3 * i]]
  local user, p = ARGV[3 * i + 3], plan[i]
  local code, claim = p, ''
  if p == held then
    code, claim = REPEAT, e.held[user]
  elseif p == pop then
    local k = e.next + 1
    if e.badPool then
      code = BAD_STATE
    elseif k > e.count then
      code = SOLD_OUT
    elseif used >= left then
      code, short = AWAITING, true
      e.awaiting[user] = true
    else
      e.next = e.next + 1
      used = used + 1
      local seq = (counter + used - 1) * stride + offset
      claim = e.tail[e.count - k + 1] .. ':' .. ARGV[3 * i + 4] .. ':' .. date .. string.format(format, seq)
      code = GRANTED
      e.granted[user] = claim
      e.writes[#e.writes + 1] = user
      e.writes[#e.writes + 1] = claim
      e.cents = e.cents + e.amounts[k]
      queued[#queued + 1] = ARGV[3 * i + 5] .. ':' .. claim .. ':' .. user
    end
  elseif p == again then
    if e.granted[user] then
      code, claim = REPEAT, e.granted[user]
    else
      code = refusal(e, now[i]) or (e.awaiting[user] and AWAITING) or (e.badPool and BAD_STATE) or SOLD_OUT
    end
  end
  reply[2 * i] = code
  reply[2 * i + 1] = claim
end

-- Write: the queue first (the one write whose key's type was not read
-- above), then once per envelope, then the counter.
if #queued > 0 then
  redis.call('LPUSH', KEYS[1], unpack(queued))
end
for _, e in ipairs(list) do
  if #e.writes > 0 then
    redis.call('HSET', e.claims, unpack(e.writes))
    redis.call('HINCRBY', e.meta, 'grabbed_cents', e.cents)
    redis.call('LTRIM', e.pool, 0, -e.next - 1)
  end
end
if used > 0 then
  redis.call('HSET', KEYS[2], 'counter', counter + used)
end

local code = DONE
if fence and short then
  code = FENCE
elseif short then
  code, info = CEILING, 0
  if counter + used >= maxc then
    code = EXHAUSTED
  end
elseif wanted > 0 and not fence and not full then
  info = left - used
end
reply[1] = info
return {code, reply}
