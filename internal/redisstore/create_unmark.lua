-- End a create's mark (create_mark.lua), only if it is still this create's:
-- one that outlived its mark must not end the mark of the next create.
--
-- KEYS[1] the mark (Keys.CreateUnderWay)
-- ARGV[1] the value this create's mark was set to
--
-- Reply {code}:
--   ENDED     the mark was this create's, and is gone
--   NOT_OURS  the mark is gone already, or another create's
local ENDED, NOT_OURS = 0, 1

if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return {ENDED}
end
return {NOT_OURS}
