-- Envelope statuses and event types become named types, and the taking of
-- event ids one function.
--
-- envelope_status and event_type are domains over text: the stored values,
-- the operators and every query a DBA writes stay as they were, the allowed
-- values are checked in one place (the domain) wherever a value is stored or
-- cast, and the query layer maps each domain to its Go type. A domain without
-- a constraint is binary-compatible with text, so the columns change type
-- without a table rewrite (only envelopes_unsettled_idx, whose predicate
-- names status, is rebuilt, and the checks naming events.type run again);
-- the constraints are added afterwards, which only scans the rows. The views
-- over the columns are dropped and created again, unchanged.

CREATE DOMAIN envelope_status AS text;
CREATE DOMAIN event_type AS text;

DROP VIEW envelope_totals;
DROP VIEW event_messages;

ALTER TABLE envelopes DROP CONSTRAINT envelopes_status_check;
ALTER TABLE envelopes ALTER COLUMN status TYPE envelope_status;
ALTER TABLE events DROP CONSTRAINT events_type_check;
ALTER TABLE events ALTER COLUMN type TYPE event_type;

ALTER DOMAIN envelope_status ADD CONSTRAINT envelope_status_check CHECK (VALUE IN
    ('loading', 'open', 'sold_out', 'expired', 'settled', 'suspended', 'failed'));
ALTER DOMAIN event_type ADD CONSTRAINT event_type_check CHECK (VALUE IN
    ('packet.claimed', 'envelope.sold_out', 'envelope.settled', 'envelope.suspended', 'envelope.recovered'));

COMMENT ON DOMAIN envelope_status IS
    'Status of an envelope: loading, open, sold_out, expired, settled, suspended or failed (see the README).';
COMMENT ON DOMAIN event_type IS
    'Type of an event: packet.claimed, envelope.sold_out, envelope.settled, envelope.suspended or envelope.recovered.';

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

-- take_event_ids reserves the ids of n events and returns the id before the
-- first of them; with n = 0 it does nothing and returns NULL. Every statement
-- that writes events calls it once, from the same few lines at its end:
--
--   , event_base AS (SELECT take_event_ids(count(*)) AS base FROM new_events)
--   , event_rows AS (
--       INSERT INTO events (id, type, envelope_id, packet_id, data)
--       SELECT b.base + row_number() OVER (ORDER BY n.kind, n.at, n.ref), ...
--       FROM new_events n CROSS JOIN event_base b ...)
--
-- Ids come from the row 'event' of sequence_numbers, not from a sequence
-- (see 000005_events): the UPDATE waits until every earlier writer has
-- committed or rolled back and holds the row until this transaction ends, so
-- ids become visible in commit order, without gaps. Callers write their
-- events in the last statement of their transaction, so the lock is held only
-- from there to the commit; it is taken after every other lock of the
-- statement (the count needs the statement's other work done first), so a
-- writer holding it waits for nothing else.
CREATE FUNCTION take_event_ids(n bigint) RETURNS bigint LANGUAGE sql VOLATILE AS $$
    UPDATE sequence_numbers SET current_value = current_value + n, updated_at = now()
    WHERE key_name = 'event' AND n > 0
    RETURNING current_value - n
$$;

COMMENT ON FUNCTION take_event_ids(bigint) IS
    'Reserves the ids of n events under the row lock of sequence_numbers ''event'' (gap-free, visible in commit order); returns the id before the first.';
