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
-- KEYS[4i-1]    meta hash of grab i's envelope     (i = 1..n)
-- KEYS[4i]      pool list of grab i's envelope
-- KEYS[4i+1]    the claims hash of grab i's user: the user's bucket of the
--               envelope's ARGV[4i+6] buckets (Keys.UserClaims)
-- KEYS[4i+2]    recipients set of grab i's envelope (read only when its meta
--               says it has recipients)
-- ARGV[1]       the day, yyyyMMdd: the first 8 digits of every order number
-- ARGV[2]       width: digits of the per-day sequence after the date
-- ARGV[3]       shards: the stride of the shard's sequence numbers
-- ARGV[4]       offset: shard + 1, the shard's first sequence number
-- ARGV[5]       the largest counter whose sequence number fits the width
-- ARGV[6i]      user id of grab i
-- ARGV[6i+1]    now, unix milliseconds
-- ARGV[6i+2]    envelope id
-- ARGV[6i+3]    digest of the password grab i carries, or ''
--               (envelope.PasswordDigest)
-- ARGV[6i+4]    the envelope's claim buckets the caller named KEYS[4i+1] by:
--               the meta's "buckets", or 0 where it has none (the one claims
--               hash of an envelope loaded before buckets)
-- ARGV[6i+5]    1: grab i holds no reservation of the user's limits and
--               must take nothing (UNRESERVED); 0: it may take a packet
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
-- the user's claim as its bucket holds it, or "" with no packet. The
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
--   CLOSED     the envelope is closed (settling or settled, or by its
--              sender), failed, or now is past its expiry, with packets left
--   SOLD_OUT   no packet left: every packet was granted (also once the
--              envelope is closed), or the last ones went to grabs before
--              this one
--   SUSPENDED  Redis lost state of this envelope; an operator decides
--   AWAITING   a packet is there but no order number (see the call's code);
--              nothing of it was taken: ask again
--   BAD_STATE  the envelope's Redis state fails a check (a meta or packet
--              that is not numbers, a total beyond exact integers, packets
--              worth more than is left); nothing of it was taken
--   NOT_STARTED    now is before the envelope's start; nothing was taken
--   NOT_RECIPIENT  the envelope has recipients and the user is not one;
--                  nothing was taken
--   WRONG_PASSWORD the envelope has a password and the grab's digest is
--                  not its; nothing was taken
--   STALE      the grab's buckets are not the meta's: its claims hash may be
--              the wrong one, so nothing of it was read or taken; ask again
--              with the meta's number
--   UNRESERVED the grab was sent without a reservation (ARGV[6i+5]) and
--              would have taken a packet; nothing was taken: send it again
--              reserved. Answered only where a reserved grab would try
--              the pool: every refusal above comes first
-- A STALE grab is answered so first; a holder's grab is answered REPEAT
-- before any other check; the others are checked in the order of refusal()
-- then gate().
--
-- Everything a write could fail on is checked before the first write, so an
-- error leaves nothing half done, for any envelope of the call.
--
-- Claims and queue entries are compact (codec.go has the format and reads
-- them): a version byte 1, then LEB128 varints and the order number's
-- digits two to a byte, ended by a 0xF nibble:
--   claim   1 packet amount grabbed_ms order_no
--   queued  1 envelope packet amount grabbed_ms order_no user
local DONE, FENCE, CEILING, EXHAUSTED = 0, 1, 2, 3
local GRANTED, REPEAT, NOT_LOADED, CLOSED, SOLD_OUT, SUSPENDED, AWAITING, BAD_STATE = 0, 1, 2, 3, 4, 5, 6, 7
local NOT_STARTED, NOT_RECIPIENT, WRONG_PASSWORD, STALE, UNRESERVED = 8, 9, 10, 11, 12

-- Keys and arguments per grab, after the call's 2 keys and 5 arguments.
local kg, ag = 4, 6
local function gkey(i, j) return KEYS[2 + kg * (i - 1) + j] end
local function garg(i, j) return ARGV[5 + ag * (i - 1) + j] end

-- Integers up to 2^53 - 1 are exact in Lua's numbers and written as digits
-- when passed to Redis.
local exact = 9007199254740991

-- The varint (LEB128) of a whole number in [0, exact].
local function varint(n)
  if n < 128 then
    return string.char(n)
  elseif n < 16384 then
    return string.char(n % 128 + 128, math.floor(n / 128))
  end
  local b = {}
  while n >= 128 do
    local low = n % 128
    b[#b + 1] = low + 128
    n = (n - low) / 128
  end
  b[#b + 1] = n
  return string.char(unpack(b))
end

-- The digits of s two to a byte, ended by a 0xF nibble.
local function bcd(s)
  local b = {}
  for i = 1, #s, 2 do
    local lo = 15
    if i < #s then
      lo = string.byte(s, i + 1) - 48
    end
    b[#b + 1] = (string.byte(s, i) - 48) * 16 + lo
  end
  if #s % 2 == 0 then
    b[#b + 1] = 255
  end
  return string.char(unpack(b))
end

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
local n = (#ARGV - 5) / ag
if n < 1 or n ~= math.floor(n) or #KEYS ~= 2 + kg * n then
  return redis.error_reply('grab: KEYS and ARGV are not 2 + 4 and 5 + 6 per grab')
end

-- The envelopes of this call, in order of first appearance, and their users.
local envs, list, now = {}, {}, {}
for i = 1, n do
  local e = envs[gkey(i, 1)]
  if not e then
    e = {meta = gkey(i, 1), pool = gkey(i, 2), recipients = gkey(i, 4), users = {}, seen = {},
         attempting = {}, granted = {}, awaiting = {}, need = 0, next = 0, cents = 0}
    envs[gkey(i, 1)] = e
    list[#list + 1] = e
  end
  local user = garg(i, 1)
  now[i] = whole(garg(i, 2), 0)
  if user == '' or not now[i] or not whole(garg(i, 3), 1) or not whole(garg(i, 5), 0)
      or (garg(i, 6) ~= '0' and garg(i, 6) ~= '1') then
    return redis.error_reply('grab: empty user, bad clock, envelope, buckets or reservation flag in grab ' .. i)
  end
end

-- Gates: the start, recipients and password of an envelope, checks that
-- take nothing. readGates reads them with the meta; gate(e, i) is grab i's
-- refusal by them, or nil.
local function readGates(e)
  if not e.status then
    return
  end
  local g = redis.call('HMGET', e.meta, 'starts', 'password', 'recipients')
  e.starts, e.password = whole(g[1] or 0, 0), g[2] or ''
  if not e.starts then
    e.badMeta, e.starts = true, 0
  end
  if (tonumber(g[3]) or 0) > 0 then
    e.members = {}
    for _, user in ipairs(e.users) do
      if not e.held[user] then
        e.members[user] = redis.call('SISMEMBER', e.recipients, user) == 1
      end
    end
  end
end

local function gate(e, i)
  if now[i] < e.starts then
    return NOT_STARTED
  elseif e.members and not e.members[garg(i, 1)] then
    return NOT_RECIPIENT
  elseif e.password ~= '' and garg(i, 4) ~= e.password then
    return WRONG_PASSWORD
  end
  return nil
end
-- End of the gates.

-- Read each envelope's meta, once, and check it: everything the writes
-- below add up must stay exact.
for _, e in ipairs(list) do
  local meta = redis.call('HMGET', e.meta, 'status', 'expires', 'total', 'grabbed_cents', 'buckets', 'claimed')
  if meta[1] == 'forgotten' then
    -- An operator refunded it: answered as if Redis held nothing of it.
    meta[1] = false
  end
  e.status, e.buckets, e.claimed = meta[1], whole(meta[5] or 0, 0), whole(meta[6] or 0, 0)
  if e.status then
    e.expires, e.total = whole(meta[2], 0), whole(meta[3], 1)
    e.grabbed = e.total and whole(meta[4], 0)
    e.badMeta = not (e.expires and e.grabbed and e.grabbed <= e.total and e.buckets and e.claimed)
  end
end

-- Grab i named its claims hash by the envelope's buckets (not stale).
local stale = {}
for i = 1, n do
  local e = envs[gkey(i, 1)]
  stale[i] = e.status ~= nil and tonumber(garg(i, 5)) ~= e.buckets
end

-- Read the claim of each user of a grab that is not stale, once: the users
-- of one envelope are in as many buckets as there are users, nearly always.
for _, e in ipairs(list) do
  e.held = {}
end
for i = 1, n do
  local e, user = envs[gkey(i, 1)], garg(i, 1)
  if not stale[i] and not e.seen[user] then
    e.seen[user], e.users[#e.users + 1] = true, user
    e.held[user] = redis.call('HGET', gkey(i, 3), user)
  end
end
for _, e in ipairs(list) do
  readGates(e)
end

-- What a grab of one envelope at time t is refused with, or nil.
local function refusal(e, t)
  if not e.status then
    return NOT_LOADED
  elseif e.status == 'suspended' then
    return SUSPENDED
  elseif e.status ~= 'open' and e.status ~= 'closed' then
    return CLOSED
  elseif e.badMeta then
    return BAD_STATE
  elseif e.grabbed == e.total then
    return SOLD_OUT
  elseif e.status ~= 'open' or t > e.expires then
    return CLOSED
  end
  return nil
end

-- First pass: which grabs take a packet from the pool (plan: a refusal's
-- code, or one of these). A user's second
-- attempt in this call repeats the first if that one is granted; otherwise
-- it is answered as the first was, or refused for its own time. An
-- unreserved grab that would take a packet takes none (unreserved).
local held, pop, again, unreserved = -1, -2, -3, -4
local plan = {}
for i = 1, n do
  local e = envs[gkey(i, 1)]
  local user = garg(i, 1)
  local code = refusal(e, now[i]) or gate(e, i)
  if stale[i] then
    plan[i] = STALE
  elseif e.held[user] then
    plan[i] = held
  elseif e.attempting[user] then
    plan[i] = again
  elseif code then
    plan[i] = code
  elseif garg(i, 6) == '1' then
    plan[i] = unreserved
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
  e.tail, e.amounts, e.ids, e.count = {}, {}, {}, 0
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
      e.amounts[k], e.ids[k] = amount, tonumber(id)
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
local afterSoldOut = {[CLOSED] = true, [NOT_STARTED] = true, [NOT_RECIPIENT] = true, [WRONG_PASSWORD] = true,
                      [UNRESERVED] = true}
local reply, queued, writes, used, short = {}, {}, {}, 0, false
local format = string.format('%%0%dd', width)
-- The date's 8 digits are 4 whole bytes of every order number's digits.
local packedDate, lastNow, lastMs = string.sub(bcd(date), 1, 4), nil, nil
for i = 1, n do
  local e = envs[gkey(i, 1)]
  local user, p = garg(i, 1), plan[i]
  local code, claim = p, ''
  if p == held then
    code, claim = REPEAT, e.held[user]
  elseif p == unreserved then
    code = UNRESERVED
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
      if now[i] ~= lastNow then
        lastNow, lastMs = now[i], varint(now[i])
      end
      local body = varint(e.ids[k]) .. varint(e.amounts[k]) .. lastMs .. packedDate .. bcd(string.format(format, seq))
      claim = '\1' .. body
      code = GRANTED
      e.granted[user] = claim
      writes[#writes + 1] = gkey(i, 3)
      writes[#writes + 1] = user
      writes[#writes + 1] = claim
      e.cents = e.cents + e.amounts[k]
      e.packedID = e.packedID or varint(tonumber(garg(i, 3)))
      queued[#queued + 1] = '\1' .. e.packedID .. body .. user
    end
  elseif p == again then
    if e.granted[user] then
      code, claim = REPEAT, e.granted[user]
    elseif garg(i, 6) == '1' then
      -- As if alone: the user's first grab in this call took nothing.
      code = refusal(e, now[i]) or gate(e, i) or UNRESERVED
    else
      code = refusal(e, now[i]) or gate(e, i) or (e.awaiting[user] and AWAITING) or (e.badPool and BAD_STATE) or SOLD_OUT
    end
  end
  -- Sold out comes before these refusals, also when the grants before
  -- this grab in the call sold the envelope out.
  if afterSoldOut[code] and e.grabbed and e.total and e.grabbed + e.cents == e.total then
    code = SOLD_OUT
  end
  reply[2 * i] = code
  reply[2 * i + 1] = claim
end

-- Write: the queue first (the one write whose key's type was not read
-- above), then the claims, then once per envelope, then the counter.
if #queued > 0 then
  redis.call('LPUSH', KEYS[1], unpack(queued))
end
for w = 1, #writes, 3 do
  redis.call('HSET', writes[w], writes[w + 1], writes[w + 2])
end
for _, e in ipairs(list) do
  if e.next > 0 then
    if e.buckets > 0 then
      redis.call('HSET', e.meta, 'grabbed_cents', e.grabbed + e.cents, 'claimed', e.claimed + e.next)
    else
      redis.call('HSET', e.meta, 'grabbed_cents', e.grabbed + e.cents)
    end
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
