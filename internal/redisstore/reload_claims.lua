-- Write a chunk of the claims PostgreSQL holds into an envelope being
-- reloaded (reload_begin.lua): their users can only repeat once it opens.
-- A chunk written twice (a call whose reply was lost, run again) changes
-- nothing and counts nothing twice.
--
-- KEYS[1] meta hash of the envelope
-- KEYS[2 ..] the claim buckets this chunk's claims go to
-- ARGV[1] the reloader's token, as reload_begin.lua put it in the meta
-- ARGV[2 ..] the claims, three arguments each: the bucket's index in KEYS
--            (2 or more), user, claim (compact, codec.go)
--
-- Reply {code}: WRITTEN, or NOT_RELOADING when the meta does not carry the
-- token (another reload began, or Redis lost the meta): nothing written.
-- Arguments that are not what this says are an error, before any write.
local WRITTEN, NOT_RELOADING = 0, 1

local n = #ARGV - 1
if #KEYS < 2 or n < 3 or n % 3 ~= 0 then
  return redis.error_reply('reload_claims: bad arguments')
end
for i = 2, #ARGV, 3 do
  local k = tonumber(ARGV[i])
  if not k or k ~= math.floor(k) or k < 2 or k > #KEYS then
    return redis.error_reply('reload_claims: bad bucket')
  end
end
if redis.call('HGET', KEYS[1], 'reloading') ~= ARGV[1] then
  return {NOT_RELOADING}
end
-- HSET answers the fields it added: a claim written before adds none.
local added = 0
for i = 2, #ARGV, 3 do
  added = added + redis.call('HSET', KEYS[tonumber(ARGV[i])], ARGV[i + 1], ARGV[i + 2])
end
redis.call('HINCRBY', KEYS[1], 'reloaded_claims', added)
return {WRITTEN}
