-- One index of claims for a user's packets, not two. A user holds at most
-- one packet per envelope (claims_envelope_user_key, on (envelope_id,
-- user_id)) and reads a history by user (claims_user_idx, on (user_id,
-- claimed_at, packet_id)): two B-tree entries a claim for one fact about a
-- user. The uniqueness on (user_id, envelope_id) serves both: it refuses a
-- user's second packet of an envelope as before, and it lists a user's claims
-- by envelope, newest envelope first (envelope ids grow as envelopes are
-- created). A claim then writes three B-tree entries, as many as a COPY
-- reference of claim-shaped rows does, and the one index that takes each
-- claim at a random page (ordered by user) is smaller: it holds an envelope
-- id where it held a time and a packet id.
--
-- A history read by grab time before is read by envelope now: the two orders
-- differ only where a user grabbed an older envelope after a newer one.
-- Claims in flight are unaffected (the flusher writes the same rows; a
-- second packet of a user is refused by the new constraint as by the old).
-- The new index is built before the old ones go. Built here, it holds
-- claims against writes while it is built (reads go on); a DBA can build it
-- beforehand without that, as docs/dba.md says:
--   CREATE UNIQUE INDEX CONCURRENTLY claims_user_envelope_key ON claims (user_id, envelope_id);
-- and the migration then only adopts it.
DO $$
DECLARE
    valid boolean;
    shaped boolean;
BEGIN
    SELECT i.indisvalid,
           i.indrelid = 'claims'::regclass AND i.indisunique AND i.indnatts = 2
           AND i.indpred IS NULL AND i.indexprs IS NULL
           AND pg_catalog.pg_get_indexdef(i.indexrelid, 1, false) = 'user_id'
           AND pg_catalog.pg_get_indexdef(i.indexrelid, 2, false) = 'envelope_id'
    INTO valid, shaped
    FROM pg_catalog.pg_index i
    WHERE i.indexrelid = to_regclass('claims_user_envelope_key');
    IF NOT FOUND THEN
        CREATE UNIQUE INDEX claims_user_envelope_key ON claims (user_id, envelope_id);
    ELSIF NOT shaped THEN
        RAISE EXCEPTION 'index claims_user_envelope_key is not UNIQUE ON claims (user_id, envelope_id): drop it and migrate again';
    ELSIF NOT valid THEN
        RAISE EXCEPTION 'index claims_user_envelope_key is invalid (a concurrent build failed): drop it and migrate again';
    END IF;
END $$;
ALTER TABLE claims ADD CONSTRAINT claims_user_envelope_key UNIQUE USING INDEX claims_user_envelope_key;
ALTER TABLE claims DROP CONSTRAINT claims_envelope_user_key;
DROP INDEX claims_user_idx;

COMMENT ON INDEX claims_user_envelope_key IS
    'A user holds at most one packet per envelope; also a user''s claims by envelope: the user''s history, newest envelope first.';
COMMENT ON VIEW user_history IS
    'Per user, every grab with its envelope (sender, share code, status); filter by user_id (indexed, by envelope: ORDER BY envelope_id DESC reads in index order, newest envelope first; ORDER BY claimed_at DESC sorts the user''s grabs).';
