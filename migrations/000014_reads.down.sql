CREATE OR REPLACE VIEW event_messages AS
SELECT e.id, e.type, e.envelope_id,
       coalesce(e.data, jsonb_build_object('envelope_id', p.envelope_id, 'packet_id', p.id,
           'user_id', p.claimed_by, 'amount_cents', p.amount_cents, 'order_no', p.order_no,
           'grabbed_at', to_char(p.claimed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')))
         || jsonb_build_object('metadata', coalesce(v.metadata, '{}'::jsonb)) AS data,
       e.created_at, e.delivered_at, e.attempts, e.next_attempt_at, e.last_error
FROM events e
LEFT JOIN packets p ON p.id = e.packet_id
LEFT JOIN envelopes v ON v.id = e.envelope_id;

DROP FUNCTION best_claim_json(bigint);
DROP FUNCTION best_claim(bigint);
DROP TABLE split_commitments;
DROP INDEX envelopes_sender_idx;
CREATE INDEX envelopes_sender_idx ON envelopes (sender_id, created_at);
DROP INDEX packets_user_claims_idx;
CREATE INDEX packets_claimed_by_idx ON packets (claimed_by, claimed_at)
    WHERE claimed_by IS NOT NULL;
DROP INDEX packets_envelope_best_idx;
DROP INDEX packets_envelope_claims_idx;
COMMENT ON VIEW event_messages IS 'Every event as the feed and the webhooks send it: a packet.claimed event''s data comes from its packet.';
