-- The two indexes of migration 16 again: the uniqueness led by the envelope,
-- and the user's history by grab time.
ALTER TABLE claims ADD CONSTRAINT claims_envelope_user_key UNIQUE (envelope_id, user_id);
CREATE INDEX claims_user_idx ON claims (user_id, claimed_at, packet_id);
COMMENT ON INDEX claims_user_idx IS
    'A user''s claims by (claimed_at, packet id): the user''s history, newest first.';
ALTER TABLE claims DROP CONSTRAINT claims_user_envelope_key;
COMMENT ON VIEW user_history IS
    'Per user, every grab with its envelope (sender, share code, status); filter by user_id (indexed), newest first by claimed_at.';
