-- Load an envelope's packets, then its meta, once.
--
-- KEYS[1] meta hash of the envelope
-- KEYS[2] pool list of the envelope
-- KEYS[3] claims hash of the envelope as it was before buckets (Keys.Claims)
-- KEYS[4] epoch of the envelope's shard
-- KEYS[5] recipients set of the envelope
-- KEYS[6] the loader's staging list (Keys.Staging), which stage.lua filled
--         with the packets when ARGV carries none: it becomes the pool
--         (RENAME, one step however many packets), and is deleted when the
--         envelope is not loaded now
-- KEYS[7 ..] the envelope's claim buckets, all of them: their number is
--         the "buckets" the meta records for the grabs (Keys.ClaimBuckets)
-- ARGV[1] expires, unix milliseconds
-- ARGV[2] packet count
-- ARGV[3] total cents, at most 2^53 - 1 (the caller checked that the
--         packets add up to no more)
-- ARGV[4] the shard epoch the caller last checked, or '' to load regardless
--         (a creator loading an envelope it has just written, which nobody
--         can have been offered yet)
-- ARGV[5] starts, unix milliseconds, or 0 for none
-- ARGV[6] password digest, or '' for none
-- ARGV[7] r, the number of recipients that follow (0: anyone may grab)
-- ARGV[8 .. 7+r]  recipients
-- ARGV[8+r ..]    packets, "<packet>:<amount>": all of them, or none when
--                 they are staged in KEYS[6]
--
-- Reply {code}:
--   LOADED        loaded now
--   ALREADY       already loaded: nothing changed (loading is idempotent)
--   INCONSISTENT  a pool or claims exist without meta: state was partly
--                 lost, so loading could offer a packet twice; nothing changed
--   EPOCH_CHANGED the shard's epoch is not ARGV[4]: the shard lost its data
--                 since the caller checked, so the envelope may have been
--                 offered before; nothing changed
--   GIVEN_UP      the envelope was given up (failed), suspended or
--                 refunded by an operator (forgotten) meanwhile: it must not
--                 be marked loaded
--   UNSTAGED      the staging list does not hold the packet count (it
--                 expired, or its Redis lost it): nothing loaded
--   OTHER         a meta of another envelope holds the id (its expiry or
--                 total differ: ids handed out again, as after PostgreSQL
--                 was restored from a backup): this one was never loaded
--                 here; nothing changed
-- Arguments that are not what this says are an error, before any write.
local LOADED, ALREADY, INCONSISTENT, EPOCH_CHANGED, GIVEN_UP, UNSTAGED, OTHER = 0, 1, 2, 3, 4, 5, 6

local exact = 9007199254740991
local function whole(v, lo)
  local n = tonumber(v)
  if n and n == math.floor(n) and n >= lo and n <= exact then
    return n
  end
  return nil
end

local count, total, r = whole(ARGV[2], 1), whole(ARGV[3], 1), whole(ARGV[7], 0)
local buckets = #KEYS - 6
local inline = #ARGV - 7 - (r or 0)
if not whole(ARGV[1], 0) or not count or not total or not r or not whole(ARGV[5], 0)
    or (inline ~= count and inline ~= 0) or total < count or buckets < 1 then
  return redis.error_reply('load: bad arguments')
end
-- Every answer but LOADED leaves the staged packets unused: drop them.
local function done(code)
  redis.call('UNLINK', KEYS[6])
  return {code}
end
if ARGV[4] ~= '' and redis.call('GET', KEYS[4]) ~= ARGV[4] then
  return done(EPOCH_CHANGED)
end
local meta = redis.call('HMGET', KEYS[1], 'status', 'expires', 'total')
local status = meta[1]
-- Only load and reload write these two, both from the envelope's row (the
-- count is the packets loaded, which a repair's load of an envelope with
-- claims already written has fewer of): a meta that differs is another
-- envelope's. (A meta written by giving up or suspending an envelope Redis
-- held nothing of has neither.)
if meta[2] and (meta[2] ~= ARGV[1] or meta[3] ~= ARGV[3]) then
  return done(OTHER)
end
if status == 'failed' or status == 'suspended' or status == 'forgotten' then
  return done(GIVEN_UP)
end
if status then
  return done(ALREADY)
end
if redis.call('EXISTS', KEYS[2], KEYS[3], KEYS[5]) > 0 then
  return done(INCONSISTENT)
end
for i = 7, #KEYS, 1000 do
  if redis.call('EXISTS', unpack(KEYS, i, math.min(i + 999, #KEYS))) > 0 then
    return done(INCONSISTENT)
  end
end
if inline == 0 and redis.call('LLEN', KEYS[6]) ~= count then
  return done(UNSTAGED)
end
-- unpack() is bounded by the Lua stack: push in chunks. The pool does not
-- exist, so no push can fail.
for i = 8, 7 + r, 1000 do
  redis.call('SADD', KEYS[5], unpack(ARGV, i, math.min(i + 999, 7 + r)))
end
if inline == 0 then
  -- The staging list lived for a while only: the pool lives until the
  -- envelope is settled.
  redis.call('RENAME', KEYS[6], KEYS[2])
  redis.call('PERSIST', KEYS[2])
end
for i = 8 + r, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('HSET', KEYS[1], 'status', 'open', 'expires', ARGV[1],
  'count', ARGV[2], 'total', ARGV[3], 'grabbed_cents', 0,
  'starts', ARGV[5], 'password', ARGV[6], 'recipients', r, 'buckets', buckets, 'claimed', 0)
return {LOADED}
