-- End a create's mark (create_mark.lua), or renew it while the create goes
-- on, only if it is still this create's: one that outlived its mark must
-- not end or keep the mark of the next create.
--
-- KEYS[1] the mark (Keys.CreateUnderWay)
-- ARGV[1] the value this create's mark was set to
-- ARGV[2] milliseconds to renew the mark for; 0: end it
--
-- Reply {code}:
--   ENDED     the mark was this create's, and is gone (or renewed)
--   NOT_OURS  the mark is gone already, or another create's
local ENDED, NOT_OURS = 0, 1

local ttl = tonumber(ARGV[2])
if not ttl or ttl < 0 or ttl ~= math.floor(ttl) then
  return redis.error_reply('create_unmark: bad lifetime')
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {NOT_OURS}
end
if ttl == 0 then
  redis.call('DEL', KEYS[1])
else
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return {ENDED}
