-- Events: the transactional outbox the campaign backend reads (GET /v1/events)
-- or receives as signed webhooks. Every change the service commits to an
-- envelope or packet that the backend acts on writes one row here in the same
-- transaction, so an event exists if and only if its change committed.

-- Event ids are positions handed out from this row. The writing statement is
-- the last of its transaction and takes the row lock there (UPDATE ...
-- RETURNING), so writers queue on the lock until the one before has
-- committed or rolled back: positions become visible in commit order and
-- without gaps, and a reader that has seen position N never later finds a
-- smaller one commit. A plain sequence would not do: nextval is taken at
-- once, and a transaction that takes 5 can commit after the one that took 6.
INSERT INTO sequence_numbers (key_name, current_value, max_value, step)
VALUES ('event', 0, 9007199254740991, 1);

CREATE TABLE events (
    id              bigint      PRIMARY KEY CHECK (id > 0),
    type            text        NOT NULL CHECK (type IN ('packet.claimed', 'envelope.sold_out',
                                    'envelope.settled', 'envelope.suspended', 'envelope.recovered')),
    envelope_id     bigint      NOT NULL,
    -- A packet.claimed event names its packet and carries no data of its
    -- own: a claimed packet's row never changes again, so the claim's facts
    -- are read from it (event_messages). Building a JSON document for every
    -- claim in the flusher's batch statement cost as much again as storing
    -- the event. Other events carry their data.
    packet_id       bigint,
    data            jsonb,
    CHECK ((type = 'packet.claimed') = (packet_id IS NOT NULL)),
    CHECK ((data IS NULL) = (packet_id IS NOT NULL)),
    -- Taken under the position lock, so it grows with id.
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- Webhook delivery: when the receiver accepted the event, and the
    -- retries of one it has not (only an envelope's first undelivered event
    -- is ever tried, so these are in effect per envelope).
    delivered_at    timestamptz,
    attempts        integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at timestamptz,
    last_error      text
);

-- An envelope's undelivered events in order; also walked one envelope at a
-- time to find every envelope's first undelivered event.
CREATE INDEX events_pending_idx ON events (envelope_id, id) WHERE delivered_at IS NULL;

-- Every event as the feed and the webhooks send it: the data of a
-- packet.claimed event comes from its packet.
CREATE VIEW event_messages AS
SELECT e.id, e.type, e.envelope_id,
       coalesce(e.data, jsonb_build_object('envelope_id', p.envelope_id, 'packet_id', p.id,
           'user_id', p.claimed_by, 'amount_cents', p.amount_cents, 'order_no', p.order_no,
           'grabbed_at', to_char(p.claimed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))) AS data,
       e.created_at, e.delivered_at, e.attempts, e.next_attempt_at, e.last_error
FROM events e
LEFT JOIN packets p ON p.id = e.packet_id;

-- Wakes the feed's long polls and the webhook sender: one notification per
-- statement that wrote events, delivered when its transaction commits. The
-- payload is the highest id written.
CREATE FUNCTION events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    top bigint;
BEGIN
    SELECT max(id) INTO top FROM written;
    IF top IS NOT NULL THEN
        PERFORM pg_notify('redpacket_events', top::text);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER events_notify AFTER INSERT ON events
    REFERENCING NEW TABLE AS written
    FOR EACH STATEMENT EXECUTE FUNCTION events_notify();
