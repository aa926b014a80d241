-- Mark the short-id bitmap complete after a rebuild from PostgreSQL.
--
-- KEYS[1] bitmap of the ids in use
-- KEYS[2] ready flag
-- ARGV[1] offset of the last id of the range, Max-Min
--
-- Reply: 1
--
-- The bitmap is made to span the whole range (its last bit keeps its value)
-- even when PostgreSQL had no id, so that a missing bitmap always means a
-- lost one.
local last = tonumber(ARGV[1])
redis.call('SETBIT', KEYS[1], last, redis.call('GETBIT', KEYS[1], last))
redis.call('SET', KEYS[2], '1')
return 1
