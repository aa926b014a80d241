-- Claims back onto their packet rows. Claims flushed after the upgrade are
-- kept: they are copied back like the others.
ALTER TABLE packet_pool ADD COLUMN claimed_by text, ADD COLUMN claimed_at timestamptz, ADD COLUMN order_no text;

UPDATE packet_pool p SET claimed_by = c.user_id, claimed_at = c.claimed_at, order_no = c.order_no
FROM claims c WHERE c.envelope_id = p.envelope_id AND c.packet_id = p.id;

DROP INDEX packet_pool_envelope_idx;
ALTER TABLE packet_pool ADD CONSTRAINT packets_check CHECK ((claimed_by IS NULL) = (claimed_at IS NULL));
ALTER TABLE packet_pool ADD CONSTRAINT packets_check1 CHECK (claimed_by IS NULL OR refunded_at IS NULL);
ALTER TABLE packet_pool ADD CONSTRAINT packets_envelope_user_key UNIQUE (envelope_id, claimed_by);
ALTER TABLE packet_pool ADD CONSTRAINT packets_order_no_key UNIQUE (order_no);
CREATE INDEX packets_claimed_at_idx ON packet_pool (claimed_at) WHERE claimed_at IS NOT NULL;
COMMENT ON INDEX packets_claimed_at_idx IS 'Grabs by time: the day''s totals and biggest packets (docs/dba.md).';
CREATE INDEX packets_envelope_claims_idx ON packet_pool (envelope_id, id) WHERE claimed_by IS NOT NULL;
COMMENT ON INDEX packets_envelope_claims_idx IS
    'An envelope''s claims in hand-out order (descending packet id): the claims list.';
CREATE INDEX packets_user_claims_idx ON packet_pool (claimed_by, claimed_at, id) WHERE claimed_by IS NOT NULL;
COMMENT ON INDEX packets_user_claims_idx IS
    'A user''s claims by (claimed_at, packet id): the user''s history, newest first.';

-- The views that read the packets view go back to the table before it goes.
CREATE OR REPLACE VIEW envelope_totals AS
SELECT e.id                                              AS envelope_id,
       e.sender_id,
       e.status,
       e.count,
       e.total_cents,
       count(p.claimed_by)                               AS grabbed_count,
       coalesce(sum(p.amount_cents) FILTER (WHERE p.claimed_by IS NOT NULL), 0)::bigint
                                                         AS grabbed_cents,
       e.count - count(p.claimed_by)                     AS remaining_count,
       e.refunded_cents,
       e.created_at,
       e.expires_at,
       e.settled_at
FROM envelopes e
LEFT JOIN packet_pool p ON p.envelope_id = e.id
GROUP BY e.id;

CREATE OR REPLACE VIEW user_grabs AS
SELECT p.claimed_by AS user_id,
       p.envelope_id,
       p.id         AS packet_id,
       p.amount_cents,
       p.order_no,
       p.claimed_at
FROM packet_pool p
WHERE p.claimed_by IS NOT NULL;

CREATE OR REPLACE VIEW user_history AS
SELECT p.claimed_by   AS user_id,
       p.claimed_at,
       p.amount_cents,
       p.order_no,
       p.id           AS packet_id,
       p.envelope_id,
       e.sender_id,
       e.share_code,
       e.status       AS envelope_status
FROM packet_pool p
JOIN envelopes e ON e.id = p.envelope_id
WHERE p.claimed_by IS NOT NULL;

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
LEFT JOIN packet_pool p ON p.id = e.packet_id
LEFT JOIN envelopes v ON v.id = e.envelope_id;

DROP VIEW packets;
DROP FUNCTION packets_write();
DROP TABLE claims;

ALTER TABLE packet_pool RENAME CONSTRAINT packet_pool_amount_cents_check TO packets_amount_cents_check;
ALTER INDEX packet_pool_pkey RENAME TO packets_pkey;
ALTER TABLE packet_pool RENAME TO packets;

COMMENT ON TABLE packets IS
    'One row per packet of an envelope: its amount, and who claimed it or when it was refunded. Inserted with the envelope; claimed by the flusher; refunded at settlement.';
COMMENT ON COLUMN packets.claimed_by IS 'The user who grabbed it; NULL while unclaimed. A user holds at most one packet per envelope.';
COMMENT ON COLUMN packets.claimed_at IS 'When the grab was granted in Redis (UTC instant), not when the flusher wrote it; NULL while unclaimed.';
COMMENT ON COLUMN packets.order_no IS 'The grab''s order number, yyyyMMdd + 10 digits, unique; NULL while unclaimed.';
