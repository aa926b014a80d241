-- Mark the short-id bitmap complete after a rebuild from PostgreSQL.
--
-- KEYS[1] bitmap of the ids in use
-- KEYS[2] ready flag
-- ARGV[1] offset of the last id of the range, Max-Min
--
-- Reply: {READY}
--
-- The bitmap is made to span the whole range (its last bit keeps its value)
-- even when PostgreSQL had no id, so that a missing bitmap always means a
-- lost one.
local READY = 0

local last = tonumber(ARGV[1])
if not last or last < 0 or last ~= math.floor(last) then
  return redis.error_reply('shortid_ready: bad offset')
end
-- GETBIT fails on a key of another type, before any write.
redis.call('SETBIT', KEYS[1], last, redis.call('GETBIT', KEYS[1], last))
redis.call('SET', KEYS[2], '1')
return {READY}
