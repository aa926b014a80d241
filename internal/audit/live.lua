-- Read an envelope's Redis state for the audit, atomically, changing nothing.
--
-- KEYS[1] meta hash of the envelope
-- KEYS[2] pool list of the envelope
-- KEYS[3] claims hash of the envelope as it was before buckets
--
-- Reply {READ, {status, grabbed_cents, pool length, claims count}}; status
-- and grabbed_cents are nil when the meta (or the field) is missing. The
-- claims are counted by the meta ("claimed", the claims in its buckets) and
-- by the length of the one hash of an envelope loaded before buckets.
--
-- One script rather than separate commands: a grab moves a packet from the
-- pool to the claims in one step, so lengths read at different moments could
-- disagree with the count although nothing is wrong.
local READ = 0

local meta = redis.call('HMGET', KEYS[1], 'status', 'grabbed_cents', 'claimed')
local claims = redis.call('HLEN', KEYS[3]) + (tonumber(meta[3]) or 0)
return {READ, {meta[1], meta[2], redis.call('LLEN', KEYS[2]), claims}}
