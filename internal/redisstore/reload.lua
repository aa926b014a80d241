-- Open an envelope reloaded from PostgreSQL (an operator's recovery of a
-- suspended envelope): reload_begin.lua dropped what Redis held,
-- reload_claims.lua wrote the claims PostgreSQL knows, and stage.lua staged
-- the packets nobody claimed. One step however large the envelope: the
-- staged list becomes the pool (RENAME), the gates and the meta are
-- written.
--
-- KEYS[1] meta hash of the envelope
-- KEYS[2] pool list of the envelope
-- KEYS[3] recipients set of the envelope
-- KEYS[4] the reloader's staging list (Keys.Staging), which stage.lua
--         filled with the packets not claimed (none: it does not exist); it
--         is deleted when the envelope is not opened now
-- ARGV[1] the reloader's token, as reload_begin.lua put it in the meta
-- ARGV[2] expires, unix milliseconds
-- ARGV[3] packet count
-- ARGV[4] total cents, at most 2^53 - 1
-- ARGV[5] grabbed cents (the claimed cents in PostgreSQL), at most the total
-- ARGV[6] n, the number of claims reload_claims.lua wrote
-- ARGV[7] the number of claim buckets (Keys.ClaimBuckets of the count)
-- ARGV[8] starts, unix milliseconds, or 0 for none
-- ARGV[9] password digest, or '' for none
-- ARGV[10] r, the number of recipients that follow (0: anyone may grab)
-- ARGV[11 .. 10+r] recipients
--
-- Reply {code}:
--   RELOADED       open now
--   NOT_SUSPENDED  the meta is not suspended, or does not carry the token
--                  (another reload began, or Redis lost it): nothing
--                  changed
--   UNSTAGED       the claims written or the packets staged are not all
--                  there (the staging list expired, or Redis lost part of
--                  what was written): nothing opened
-- Arguments that are not what this says are an error, before any write.
local RELOADED, NOT_SUSPENDED, UNSTAGED = 0, 1, 2

local exact = 9007199254740991
local function whole(v, lo)
  local n = tonumber(v)
  if n and n == math.floor(n) and n >= lo and n <= exact then
    return n
  end
  return nil
end

local count, total, grabbed = whole(ARGV[3], 1), whole(ARGV[4], 1), whole(ARGV[5], 0)
local claims, buckets, r = whole(ARGV[6], 0), whole(ARGV[7], 1), whole(ARGV[10], 0)
if #KEYS ~= 4 or not ARGV[1] or ARGV[1] == '' or not whole(ARGV[2], 0) or not count or not total
    or not grabbed or grabbed > total or not claims or claims > count or not buckets
    or not whole(ARGV[8], 0) or not r or #ARGV ~= 10 + r then
  return redis.error_reply('reload: bad arguments')
end
-- Every answer but RELOADED leaves the staged packets unused: drop them.
local function done(code)
  redis.call('UNLINK', KEYS[4])
  return {code}
end
local meta = redis.call('HMGET', KEYS[1], 'status', 'reloading', 'reloaded_claims')
if meta[1] ~= 'suspended' or meta[2] ~= ARGV[1] then
  return done(NOT_SUSPENDED)
end
if tonumber(meta[3]) ~= claims or redis.call('LLEN', KEYS[4]) ~= count - claims then
  return done(UNSTAGED)
end
-- unpack() is bounded by the Lua stack: add in chunks. Recipients were
-- dropped when the reload began.
for i = 11, 10 + r, 1000 do
  redis.call('SADD', KEYS[3], unpack(ARGV, i, math.min(i + 999, 10 + r)))
end
if count > claims then
  -- The staging list lived for a while only: the pool lives until the
  -- envelope is settled.
  redis.call('RENAME', KEYS[4], KEYS[2])
  redis.call('PERSIST', KEYS[2])
end
redis.call('HDEL', KEYS[1], 'reloading', 'reloaded_claims')
redis.call('HSET', KEYS[1], 'status', 'open', 'expires', ARGV[2],
  'count', ARGV[3], 'total', ARGV[4], 'grabbed_cents', ARGV[5],
  'starts', ARGV[8], 'password', ARGV[9], 'recipients', r, 'buckets', buckets, 'claimed', claims)
return {RELOADED}
