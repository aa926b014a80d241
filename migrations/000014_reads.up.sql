-- Reads for users and campaign backends: who grabbed what of an envelope (in
-- the order the packets were handed out) and its luckiest grab, a user's
-- claims and a sender's envelopes newest first, each paged by a key on an
-- index, so a deep page costs what the first does; the split commitment that
-- lets anyone check the split was fixed before the first grab; and the
-- settlement times the reconciliation export reads by day.

-- Redis hands an envelope's packets out from the end of its pool, which is
-- loaded (and reloaded after a loss) in packet id order: packets go out in
-- descending id order. This index lists an envelope's claims in that order
-- (GET /v1/envelopes/{id}/claims). Partial: a packet enters it when it is
-- claimed, in the update that writes the other indexes anyway.
CREATE INDEX packets_envelope_claims_idx ON packets (envelope_id, id)
    WHERE claimed_by IS NOT NULL;
COMMENT ON INDEX packets_envelope_claims_idx IS
    'An envelope''s claims in hand-out order (descending packet id): the claims list.';

-- An envelope's luckiest grab is the first entry of this index: reading it
-- costs the same for 10 claims or 100,000 (sorting the claims of a
-- 100,000-packet envelope took about 70 ms, for every status answer).
CREATE INDEX packets_envelope_best_idx ON packets (envelope_id, amount_cents DESC, id DESC)
    WHERE claimed_by IS NOT NULL;
COMMENT ON INDEX packets_envelope_best_idx IS
    'An envelope''s claims by amount, largest first, the first handed out on a tie: the luckiest grab (best_claim).';

-- A user's claims newest first (GET /v1/users/{user_id}/claims): the packet
-- id breaks ties of claimed_at, so the key (claimed_at, id) is unique.
-- Replaces packets_claimed_by_idx (claimed_by, claimed_at), a prefix of it.
CREATE INDEX packets_user_claims_idx ON packets (claimed_by, claimed_at, id)
    WHERE claimed_by IS NOT NULL;
COMMENT ON INDEX packets_user_claims_idx IS
    'A user''s claims by (claimed_at, packet id): the user''s history, newest first.';

-- A sender's envelopes newest first (GET /v1/senders/{sender_id}/envelopes),
-- the envelope id breaking ties of created_at. Built under a name of its
-- own, it takes the old index's name once that is dropped (at the end).
CREATE INDEX envelopes_sender_new_idx ON envelopes (sender_id, created_at, id);

-- The refunds of a day (flusher export) use envelopes_settled_at_idx
-- (migration 000010).

-- The split commitment of each envelope, written with it.
CREATE TABLE split_commitments (
    envelope_id bigint PRIMARY KEY,
    salt        text   NOT NULL CHECK (salt ~ '^[0-9a-f]{64}$'),
    commitment  text   NOT NULL CHECK (commitment ~ '^[0-9a-f]{64}$')
);
COMMENT ON TABLE split_commitments IS
    'The commitment to an envelope''s split, given in the create answer; the salt is shown (GET /v1/envelopes/{id}/split) only once the envelope is settled. One row per envelope, written in the transaction that writes the envelope; envelopes created before this table have none.';
COMMENT ON COLUMN split_commitments.envelope_id IS 'The envelope (envelopes.id).';
COMMENT ON COLUMN split_commitments.salt IS
    '32 random bytes in lowercase hex, kept secret until the envelope is settled so nobody can test guesses of the split against the commitment.';
COMMENT ON COLUMN split_commitments.commitment IS
    'Lowercase hex SHA-256 of salt || '':'' || "id:amount,id:amount,..." over every packet in hand-out order (descending packet id), amounts in cents.';

-- best_claim is an envelope's luckiest grab: the largest amount, the
-- earliest grab (the first handed out, the highest packet id) on a tie; no
-- row when nothing was claimed. The status answer, the claims list and the
-- envelope.sold_out and envelope.settled events all read it here, so they
-- agree. Whether it is shown yet (the envelope sold out, closed or expired)
-- is the caller's question. Fixed-kind envelopes, whose packets are all
-- equal, have no luckiest grab: no row for them.
CREATE FUNCTION best_claim(envelope bigint)
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

-- best_claim_json is best_claim as the API writes a claim, or JSON null.
CREATE FUNCTION best_claim_json(envelope bigint) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT jsonb_build_object('user_id', b.user_id, 'packet_id', b.packet_id,
        'amount_cents', b.amount_cents, 'order_no', b.order_no,
        'grabbed_at', to_char(b.claimed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
        FROM best_claim(envelope) b), 'null'::jsonb)
$$;
COMMENT ON FUNCTION best_claim_json(bigint) IS
    'best_claim as the API writes a claim (user_id, packet_id, amount_cents, order_no, grabbed_at), or JSON null.';

-- The envelope.sold_out and envelope.settled events carry the luckiest grab
-- as "best". It is read when the event is, not stored with it: both events
-- come after the envelope's last claim, so it is the same at any time, and
-- the statements that write the events stay as they were.
CREATE OR REPLACE VIEW event_messages AS
SELECT e.id, e.type, e.envelope_id,
       CASE WHEN e.type IN ('envelope.sold_out', 'envelope.settled')
            THEN e.data || jsonb_build_object('best', best_claim_json(e.envelope_id))
            ELSE coalesce(e.data, jsonb_build_object('envelope_id', p.envelope_id, 'packet_id', p.id,
                'user_id', p.claimed_by, 'amount_cents', p.amount_cents, 'order_no', p.order_no,
                'grabbed_at', to_char(p.claimed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')))
       END || jsonb_build_object('metadata', coalesce(v.metadata, '{}'::jsonb)) AS data,
       e.created_at, e.delivered_at, e.attempts, e.next_attempt_at, e.last_error
FROM events e
LEFT JOIN packets p ON p.id = e.packet_id
LEFT JOIN envelopes v ON v.id = e.envelope_id;
COMMENT ON VIEW event_messages IS
    'Every event as the feed and the webhooks send it: a packet.claimed event''s data from its packet, the luckiest grab added to envelope.sold_out and envelope.settled, the envelope''s metadata added to every event.';

-- The indexes replaced above go last. Building an index holds its table
-- against writes only (SHARE), but DROP INDEX takes the table's ACCESS
-- EXCLUSIVE lock, which stops reads too and is held until the migration
-- commits: taken at the end, it is held for these catalog changes rather
-- than for the index builds (docs/dba.md, "Upgrading to migration 14").
DROP INDEX packets_claimed_by_idx;
DROP INDEX envelopes_sender_idx;
ALTER INDEX envelopes_sender_new_idx RENAME TO envelopes_sender_idx;
COMMENT ON INDEX envelopes_sender_idx IS
    'A sender''s envelopes by (created_at, id): the sender''s history, newest first.';
