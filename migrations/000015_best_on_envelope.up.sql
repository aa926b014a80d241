-- An envelope's luckiest grab is kept on its row, in the flusher's claim
-- statement that already updates the row's claimed_cents, instead of read
-- from packets_envelope_best_idx. That index took an entry for every claimed
-- packet, a random insert into a third index of the claim write, to serve one
-- read per status answer; the two columns cost the claim write nothing (the
-- row is rewritten anyway, and neither column is indexed, so the update
-- stays HOT where it was).
ALTER TABLE envelopes ADD COLUMN best_packet_id bigint;
ALTER TABLE envelopes ADD COLUMN best_amount_cents bigint;
ALTER TABLE envelopes ADD CONSTRAINT envelopes_best_check
    CHECK ((best_packet_id IS NULL) = (best_amount_cents IS NULL));
COMMENT ON COLUMN envelopes.best_packet_id IS
    'The luckiest grab''s packet: the claimed packet with the largest amount, the first handed out (highest id) on a tie; NULL until the first claim. Kept by the flusher with claimed_cents. Read it through best_claim(id), which also leaves out fixed-kind envelopes.';
COMMENT ON COLUMN envelopes.best_amount_cents IS
    'The amount of best_packet_id, so the flusher compares a batch''s best against it without reading the packet.';

-- Envelopes claimed before this migration: their best, the first entry of
-- the index this replaces, one index probe per envelope with claims. The
-- migration holds the envelopes table locked while it runs (ADD COLUMN):
-- docs/dba.md says what that means for a large ledger.
UPDATE envelopes e
SET best_packet_id = b.id, best_amount_cents = b.amount_cents
FROM envelopes v
CROSS JOIN LATERAL (
    SELECT p.id, p.amount_cents FROM packets p
    WHERE p.envelope_id = v.id AND p.claimed_by IS NOT NULL
    ORDER BY p.amount_cents DESC, p.id DESC
    LIMIT 1) b
WHERE v.claimed_cents > 0 AND e.id = v.id;

DROP INDEX packets_envelope_best_idx;

CREATE OR REPLACE FUNCTION best_claim(envelope bigint)
RETURNS TABLE (packet_id bigint, user_id text, amount_cents bigint, order_no text, claimed_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT p.id, p.claimed_by, p.amount_cents, p.order_no, p.claimed_at
    FROM envelopes v
    JOIN packets p ON p.id = v.best_packet_id
    WHERE v.id = envelope AND v.kind <> 'fixed'
$$;
COMMENT ON FUNCTION best_claim(bigint) IS
    'An envelope''s luckiest grab: the largest amount, the first handed out on a tie (envelopes.best_packet_id); no row when nothing was claimed or the envelope is of the fixed kind.';
