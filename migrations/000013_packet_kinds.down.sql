CREATE OR REPLACE VIEW event_messages AS
SELECT e.id, e.type, e.envelope_id,
       coalesce(e.data, jsonb_build_object('envelope_id', p.envelope_id, 'packet_id', p.id,
           'user_id', p.claimed_by, 'amount_cents', p.amount_cents, 'order_no', p.order_no,
           'grabbed_at', to_char(p.claimed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))) AS data,
       e.created_at, e.delivered_at, e.attempts, e.next_attempt_at, e.last_error
FROM events e
LEFT JOIN packets p ON p.id = e.packet_id;

DROP TABLE envelope_recipients;

ALTER TABLE envelopes
    DROP COLUMN kind,
    DROP COLUMN recipients_count,
    DROP COLUMN password_digest,
    DROP COLUMN greeting,
    DROP COLUMN metadata,
    DROP COLUMN starts_at,
    DROP COLUMN closed_at;

DROP DOMAIN envelope_kind;
