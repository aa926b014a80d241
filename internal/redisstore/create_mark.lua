-- Mark a create that carries an Idempotency-Key as under way, unless one
-- with that key is: a repeat sent before the first has written its key is
-- then told to wait, or that its body is another.
--
-- KEYS[1] the mark (Keys.CreateUnderWay)
-- ARGV[1] the mark's value: the request's fingerprint (64 hex digits), ':'
--         and a token of this create
-- ARGV[2] lifetime of the mark in milliseconds
--
-- Reply {code}:
--   MARKED      this create is under way now
--   UNDER_WAY   a create of the same request is under way
--   OTHER_BODY  a create with the key and another body is under way
local MARKED, UNDER_WAY, OTHER_BODY = 0, 1, 2

local ttl = tonumber(ARGV[2])
if not ttl or ttl < 1 or ttl ~= math.floor(ttl) then
  return redis.error_reply('create_mark: bad lifetime')
end
local held = redis.call('GET', KEYS[1])
if not held then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
  return {MARKED}
end
if string.sub(held, 1, 65) == string.sub(ARGV[1], 1, 65) then
  return {UNDER_WAY}
end
return {OTHER_BODY}
