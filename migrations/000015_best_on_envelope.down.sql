CREATE OR REPLACE FUNCTION best_claim(envelope bigint)
RETURNS TABLE (packet_id bigint, user_id text, amount_cents bigint, order_no text, claimed_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT p.id, p.claimed_by, p.amount_cents, p.order_no, p.claimed_at
    FROM packets p
    WHERE p.envelope_id = envelope AND p.claimed_by IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM envelopes v WHERE v.id = envelope AND v.kind = 'fixed')
    ORDER BY p.amount_cents DESC, p.id DESC
    LIMIT 1
$$;
COMMENT ON FUNCTION best_claim(bigint) IS
    'An envelope''s luckiest grab: the largest amount, the first handed out on a tie; no row when nothing was claimed or the envelope is of the fixed kind.';

CREATE INDEX packets_envelope_best_idx ON packets (envelope_id, amount_cents DESC, id DESC)
    WHERE claimed_by IS NOT NULL;
COMMENT ON INDEX packets_envelope_best_idx IS
    'An envelope''s claims by amount, largest first, the first handed out on a tie: the luckiest grab (best_claim).';

ALTER TABLE envelopes DROP CONSTRAINT envelopes_best_check;
ALTER TABLE envelopes DROP COLUMN best_amount_cents;
ALTER TABLE envelopes DROP COLUMN best_packet_id;
