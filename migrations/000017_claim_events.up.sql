-- packet.claimed events served from the claims. Each claim used to be
-- followed by an events row (a heap row and three index entries) that only
-- named its packet: a third of the flusher's write (docs/scaling.md, step 3).
-- Now a batch the flusher appends writes one claim_event_runs row per
-- envelope of the batch: the positions of that envelope's claim events,
-- taken under the same lock as every other event's, the packets in position
-- order, and the webhook delivery of the run. Positions stay gap-free and
-- visible in commit order. Claims written one by one (the guarded
-- statements, repairs through the packets view) and those flushed before
-- this migration keep their events rows; nothing is moved.

CREATE TABLE claim_event_runs (
    first_position    bigint      PRIMARY KEY CHECK (first_position > 0),
    last_position     bigint      NOT NULL,
    envelope_id       bigint      NOT NULL,
    packet_ids        bigint[]    NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    delivered_through bigint      NOT NULL,
    delivered_at      timestamptz,
    attempts          integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at   timestamptz,
    last_error        text,
    CHECK (cardinality(packet_ids) = last_position - first_position + 1),
    CHECK (delivered_through BETWEEN first_position - 1 AND last_position)
);
-- An envelope's runs with undelivered events; walked one envelope at a time
-- with events_pending_idx to find every envelope's first undelivered event.
CREATE INDEX claim_event_runs_pending_idx ON claim_event_runs (envelope_id, first_position)
    WHERE delivered_through < last_position;
CREATE INDEX claim_event_runs_envelope_idx ON claim_event_runs (envelope_id, first_position);

COMMENT ON TABLE claim_event_runs IS
    'The packet.claimed events of claims the flusher appended: one row per envelope per batch, its claims'' events at positions first_position..last_position, one per packet of packet_ids in that order. Read them with the claim_events view. Pruned after EVENTS_RETENTION like events.';
COMMENT ON COLUMN claim_event_runs.first_position IS 'Position in the feed of its first claim event (take_event_ids: gap-free, visible in commit order).';
COMMENT ON COLUMN claim_event_runs.last_position IS 'Position of its last claim event.';
COMMENT ON COLUMN claim_event_runs.envelope_id IS 'The envelope whose claims they are.';
COMMENT ON COLUMN claim_event_runs.packet_ids IS 'The claimed packets, in position order (grab order): the event at position p is the claim of packet_ids[p - first_position + 1] (claims, by envelope_id and packet_id).';
COMMENT ON COLUMN claim_event_runs.created_at IS 'When it was written (clock time under the position lock).';
COMMENT ON COLUMN claim_event_runs.delivered_through IS 'Webhook delivery: position of the last event the receiver accepted, first_position - 1 before any. Events are delivered in order, so these are the run''s delivered ones.';
COMMENT ON COLUMN claim_event_runs.delivered_at IS 'When the receiver accepted the event at delivered_through; NULL before any.';
COMMENT ON COLUMN claim_event_runs.attempts IS 'Failed deliveries of the event after delivered_through.';
COMMENT ON COLUMN claim_event_runs.next_attempt_at IS 'When that event''s next delivery is due after a failure; NULL before any.';
COMMENT ON COLUMN claim_event_runs.last_error IS 'The last failed delivery, in words; NULL before any.';
COMMENT ON INDEX claim_event_runs_pending_idx IS
    'Envelopes'' runs with undelivered events, in order: where the webhook sender finds its work.';
COMMENT ON INDEX claim_event_runs_envelope_idx IS
    'An envelope''s runs in order: its events, and the retention of its rows.';

-- The claim event at a position, as an events row (the row type of events);
-- no row when the position is not a claim event's. One probe: the run (the
-- last one starting at or before the position).
CREATE FUNCTION claim_event_at(pos bigint) RETURNS SETOF events
LANGUAGE sql STABLE AS $$
SELECT pos, 'packet.claimed'::event_type, r.envelope_id, r.packet_ids[pos - r.first_position + 1], NULL::jsonb,
       r.created_at,
       CASE WHEN pos <= r.delivered_through THEN r.delivered_at END,
       CASE WHEN pos = r.delivered_through + 1 THEN r.attempts ELSE 0 END,
       CASE WHEN pos = r.delivered_through + 1 THEN r.next_attempt_at END,
       CASE WHEN pos = r.delivered_through + 1 THEN r.last_error END
FROM (SELECT * FROM claim_event_runs x WHERE x.first_position <= pos ORDER BY x.first_position DESC LIMIT 1) r
WHERE r.last_position >= pos
$$;
COMMENT ON FUNCTION claim_event_at(bigint) IS
    'The claim event (claim_event_runs) at a position, with the columns of events; no row when there is none.';

-- Each run's events as events rows: the shape of events, one row per claim.
-- The envelope is the run's, so a filter on it finds the runs by index.
CREATE VIEW claim_events AS
SELECT e.id, e.type, r.envelope_id, e.packet_id, e.data, e.created_at, e.delivered_at, e.attempts,
       e.next_attempt_at, e.last_error
FROM claim_event_runs r
CROSS JOIN LATERAL generate_series(r.first_position, r.last_position) AS p(pos)
CROSS JOIN LATERAL claim_event_at(p.pos) e;

COMMENT ON VIEW claim_events IS
    'The packet.claimed events of claim_event_runs, one row per claim, with the columns of events (SELECT * FROM events UNION ALL SELECT * FROM claim_events is every event).';
COMMENT ON COLUMN claim_events.id IS 'Position in the feed.';
COMMENT ON COLUMN claim_events.type IS 'Always packet.claimed.';
COMMENT ON COLUMN claim_events.envelope_id IS 'The envelope.';
COMMENT ON COLUMN claim_events.packet_id IS 'The claimed packet (claims.packet_id).';
COMMENT ON COLUMN claim_events.data IS 'NULL: the claim''s facts are in claims.';
COMMENT ON COLUMN claim_events.created_at IS 'claim_event_runs.created_at.';
COMMENT ON COLUMN claim_events.delivered_at IS 'For an event the receiver accepted, when it accepted its run''s last accepted one; NULL otherwise.';
COMMENT ON COLUMN claim_events.attempts IS 'For its run''s first undelivered event, the failed deliveries; 0 otherwise.';
COMMENT ON COLUMN claim_events.next_attempt_at IS 'For its run''s first undelivered event, when the next delivery is due.';
COMMENT ON COLUMN claim_events.last_error IS 'For its run''s first undelivered event, the last failed delivery.';

-- An event's data as it is sent, in one place for the feed, the webhooks and
-- event_messages: a packet.claimed event's from its claim, the luckiest grab
-- added to envelope.sold_out and envelope.settled, the envelope's metadata
-- added to every event. The caller joins the claim and the envelope's
-- metadata: one expression and no queries of its own, so PostgreSQL inlines
-- it into the caller's plan instead of running a query per event.
CREATE FUNCTION event_json(ev_type event_type, envelope bigint, ev_data jsonb, claim claims, metadata jsonb)
RETURNS jsonb LANGUAGE sql STABLE AS $$
SELECT CASE WHEN ev_type IN ('envelope.sold_out', 'envelope.settled')
            THEN ev_data || jsonb_build_object('best', best_claim_json(envelope))
            WHEN ev_data IS NOT NULL THEN ev_data
            ELSE jsonb_build_object('envelope_id', (claim).envelope_id, 'packet_id', (claim).packet_id,
                     'user_id', (claim).user_id, 'amount_cents', (claim).amount_cents, 'order_no', (claim).order_no,
                     'grabbed_at', to_char((claim).claimed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
       END || jsonb_build_object('metadata', coalesce(metadata, '{}'::jsonb))
$$;
COMMENT ON FUNCTION event_json(event_type, bigint, jsonb, claims, jsonb) IS
    'An event''s JSON data as the feed and the webhooks send it, from its type, envelope, stored data, claim (packet.claimed) and envelope metadata.';

-- The same columns as before, now over both kinds of rows.
CREATE OR REPLACE VIEW event_messages AS
SELECT e.id, e.type, e.envelope_id, event_json(e.type, e.envelope_id, e.data, c, v.metadata) AS data,
       e.created_at, e.delivered_at, e.attempts, e.next_attempt_at, e.last_error
FROM (SELECT id, type, envelope_id, packet_id, data, created_at, delivered_at, attempts, next_attempt_at, last_error
      FROM events
      UNION ALL
      SELECT id, type, envelope_id, packet_id, data, created_at, delivered_at, attempts, next_attempt_at, last_error
      FROM claim_events) e
LEFT JOIN claims c ON c.envelope_id = e.envelope_id AND c.packet_id = e.packet_id
LEFT JOIN envelopes v ON v.id = e.envelope_id;

COMMENT ON VIEW event_messages IS
    'Every event as the feed and the webhooks send it (events and claim_events, data from event_json): a packet.claimed event''s data from its claim, the luckiest grab added to envelope.sold_out and envelope.settled, the envelope''s metadata added to every event.';
COMMENT ON COLUMN event_messages.id IS 'Position in the feed.';
COMMENT ON COLUMN event_messages.type IS 'events.type.';
COMMENT ON COLUMN event_messages.envelope_id IS 'events.envelope_id.';
COMMENT ON COLUMN event_messages.data IS 'The event''s JSON data as sent.';
COMMENT ON COLUMN event_messages.created_at IS 'events.created_at.';
COMMENT ON COLUMN event_messages.delivered_at IS 'events.delivered_at: accepted by the webhook receiver.';
COMMENT ON COLUMN event_messages.attempts IS 'events.attempts: failed webhook deliveries.';
COMMENT ON COLUMN event_messages.next_attempt_at IS 'events.next_attempt_at.';
COMMENT ON COLUMN event_messages.last_error IS 'events.last_error.';

-- Runs wake the feed's long polls and the webhook sender as events rows do.
CREATE FUNCTION claim_event_runs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    top bigint;
BEGIN
    SELECT max(last_position) INTO top FROM written;
    IF top IS NOT NULL THEN
        PERFORM pg_notify('redpacket_events', top::text);
    END IF;
    RETURN NULL;
END $$;
COMMENT ON FUNCTION claim_event_runs_notify() IS
    'Trigger of claim_event_runs: one pg_notify on channel redpacket_events per statement that wrote runs, payload the highest position; delivered at commit.';

CREATE TRIGGER claim_event_runs_notify AFTER INSERT ON claim_event_runs
    REFERENCING NEW TABLE AS written
    FOR EACH STATEMENT EXECUTE FUNCTION claim_event_runs_notify();
