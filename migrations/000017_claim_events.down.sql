-- The runs' claim events become events rows again, each with its delivery
-- state, before the runs go: nothing the feed or the webhooks have to send
-- is lost.
INSERT INTO events (id, type, envelope_id, packet_id, data, created_at, delivered_at, attempts, next_attempt_at, last_error)
SELECT id, type, envelope_id, packet_id, data, created_at, delivered_at, attempts, next_attempt_at, last_error
FROM claim_events;

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
COMMENT ON COLUMN event_messages.id IS 'events.id: position in the feed.';

DROP FUNCTION event_json(event_type, bigint, jsonb, claims, jsonb);
DROP VIEW claim_events;
DROP FUNCTION claim_event_at(bigint);
DROP TABLE claim_event_runs;
DROP FUNCTION claim_event_runs_notify();
