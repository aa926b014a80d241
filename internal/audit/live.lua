-- Read an envelope's Redis state for the audit, atomically, changing nothing.
--
-- KEYS[1] meta hash of the envelope
-- KEYS[2] pool list of the envelope
-- KEYS[3] claims hash of the envelope
--
-- Reply {READ, {status, grabbed_cents, pool length, claims count}}; status
-- and grabbed_cents are nil when the meta (or the field) is missing.
--
-- One script rather than separate commands: a grab moves a packet from the
-- pool to the claims in one step, so lengths read at different moments could
-- disagree with the count although nothing is wrong.
local READ = 0

local meta = redis.call('HMGET', KEYS[1], 'status', 'grabbed_cents')
return {READ, {meta[1], meta[2], redis.call('LLEN', KEYS[2]), redis.call('HLEN', KEYS[3])}}
