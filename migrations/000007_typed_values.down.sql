DROP FUNCTION IF EXISTS take_event_ids(bigint);

DROP VIEW IF EXISTS envelope_totals;
DROP VIEW IF EXISTS event_messages;

ALTER TABLE envelopes ALTER COLUMN status TYPE text;
ALTER TABLE envelopes ADD CONSTRAINT envelopes_status_check CHECK (status IN
    ('loading', 'open', 'sold_out', 'expired', 'settled', 'suspended', 'failed'));
ALTER TABLE events ALTER COLUMN type TYPE text;
ALTER TABLE events ADD CONSTRAINT events_type_check CHECK (type IN ('packet.claimed', 'envelope.sold_out',
    'envelope.settled', 'envelope.suspended', 'envelope.recovered'));

DROP DOMAIN IF EXISTS envelope_status;
DROP DOMAIN IF EXISTS event_type;

CREATE VIEW envelope_totals AS
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
LEFT JOIN packets p ON p.envelope_id = e.id
GROUP BY e.id;

CREATE VIEW event_messages AS
SELECT e.id, e.type, e.envelope_id,
       coalesce(e.data, jsonb_build_object('envelope_id', p.envelope_id, 'packet_id', p.id,
           'user_id', p.claimed_by, 'amount_cents', p.amount_cents, 'order_no', p.order_no,
           'grabbed_at', to_char(p.claimed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))) AS data,
       e.created_at, e.delivered_at, e.attempts, e.next_attempt_at, e.last_error
FROM events e
LEFT JOIN packets p ON p.id = e.packet_id;
