-- name: ListenEvents :exec
-- ListenEvents subscribes the connection to redpacket_events, which a
-- trigger on events notifies when events commit (the payload is the highest
-- id a statement wrote).
LISTEN redpacket_events;

-- name: EventsAfter :many
-- EventsAfter lists up to max_rows events with ids above after, in id order.
SELECT id, type, envelope_id, data, created_at, attempts
FROM event_messages WHERE id > @after ORDER BY id LIMIT @max_rows;

-- name: DeliveryHeads :many
-- DeliveryHeads walks the pending index one envelope at a time (a loose
-- index scan: one probe per envelope, however many events each has waiting)
-- from the envelope after_envelope on, and returns the first undelivered
-- events of up to max_rows envelopes that are due and not in skip, by
-- envelope. The walk is evaluated lazily, so it stops once enough are found.
WITH RECURSIVE heads AS (
    (SELECT f.envelope_id, f.id, f.next_attempt_at FROM events f
     WHERE f.delivered_at IS NULL AND f.envelope_id > @after_envelope ORDER BY f.envelope_id, f.id LIMIT 1)
    UNION ALL
    SELECT n.envelope_id, n.id, n.next_attempt_at FROM heads h CROSS JOIN LATERAL (
        SELECT x.envelope_id, x.id, x.next_attempt_at FROM events x
        WHERE x.delivered_at IS NULL AND x.envelope_id > h.envelope_id ORDER BY x.envelope_id, x.id LIMIT 1) n
), due AS MATERIALIZED (
    SELECT id FROM heads
    WHERE (next_attempt_at IS NULL OR next_attempt_at <= clock_timestamp()) AND NOT envelope_id = ANY(@skip::bigint[])
    LIMIT @max_rows
)
SELECT m.id, m.type, m.envelope_id, m.data, m.created_at, m.attempts
FROM due JOIN event_messages m ON m.id = due.id
ORDER BY m.envelope_id;

-- name: NextUndelivered :one
-- NextUndelivered is the id of an envelope's first undelivered event.
SELECT id FROM events WHERE envelope_id = @envelope_id AND delivered_at IS NULL
ORDER BY id LIMIT 1;

-- name: LockDueEvent :one
-- LockDueEvent locks an event for its delivery if it is undelivered, due
-- and locked by no other sender, and returns it; no row otherwise.
WITH locked AS (
    SELECT e.id, e.attempts FROM events e WHERE e.id = @id AND e.delivered_at IS NULL
      AND (e.next_attempt_at IS NULL OR e.next_attempt_at <= clock_timestamp())
    FOR UPDATE SKIP LOCKED
)
SELECT m.id, m.type, m.envelope_id, m.data, m.created_at, l.attempts
FROM locked l JOIN event_messages m ON m.id = l.id;

-- name: MarkEventDelivered :exec
UPDATE events SET delivered_at = clock_timestamp(), next_attempt_at = NULL WHERE id = @id;

-- name: MarkEventFailed :exec
-- MarkEventFailed records a failed delivery attempt and when to try again.
UPDATE events SET attempts = attempts + 1, last_error = left(@last_error::text, 500),
    next_attempt_at = clock_timestamp() + (@retry_in_us::bigint) * '1 microsecond'::interval
WHERE id = @id;

-- name: PruneEvents :one
-- PruneEvents deletes, among up to max_rows events with ids above after,
-- those created before cutoff (only delivered ones when delivered_only). It
-- returns how many it deleted, the last id it looked at, and done when it
-- reached the end or events newer than cutoff.
WITH page AS (SELECT v.id, v.created_at FROM events v WHERE v.id > @after ORDER BY v.id LIMIT @max_rows::int),
gone AS (
    DELETE FROM events e USING page p
    WHERE e.id = p.id AND e.created_at < @cutoff::timestamptz AND (e.delivered_at IS NOT NULL OR NOT @delivered_only::boolean)
    RETURNING e.id)
SELECT (SELECT count(*) FROM gone) AS deleted, coalesce((SELECT max(id) FROM page), @after)::bigint AS last,
       ((SELECT count(*) FROM page) < @max_rows::int OR EXISTS (SELECT 1 FROM page p WHERE p.created_at >= @cutoff::timestamptz))::boolean AS done;
