-- name: ListenEvents :exec
-- ListenEvents subscribes the connection to redpacket_events, which a
-- trigger on events notifies when events commit (the payload is the highest
-- id a statement wrote).
LISTEN redpacket_events;

-- name: EventsAfter :many
-- EventsAfter lists up to max_rows events with positions above after, in
-- order, from both kinds of rows: events rows by id, and claim events by
-- their runs. The runs are taken in position order with how many of their
-- events come before each (every run holds all its positions: a run is
-- deleted whole), so no more than max_rows claims are read.
WITH arg AS (
    SELECT @after::bigint AS after, @max_rows::int AS max_rows
), runs AS (
    SELECT r.first_position, r.last_position, r.envelope_id, r.packet_ids, r.created_at,
           r.delivered_through, r.attempts, greatest(r.first_position, a.after + 1) AS from_position
    FROM ((SELECT first_position, last_position, envelope_id, packet_ids, created_at, delivered_through, attempts
           FROM claim_event_runs x
           WHERE x.first_position <= @after::bigint
           ORDER BY x.first_position DESC LIMIT 1)
          UNION ALL
          (SELECT first_position, last_position, envelope_id, packet_ids, created_at, delivered_through, attempts
           FROM claim_event_runs y
           WHERE y.first_position > @after::bigint
           ORDER BY y.first_position LIMIT @max_rows::int)) r
    CROSS JOIN arg a
    WHERE r.last_position > a.after
), counted AS (
    SELECT r.first_position, r.last_position, r.envelope_id, r.packet_ids, r.created_at,
           r.delivered_through, r.attempts, r.from_position,
           coalesce(sum(r.last_position - r.from_position + 1) OVER (ORDER BY r.first_position
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)::bigint AS before
    FROM runs r
), feed AS (
    (SELECT e.id, e.type, e.envelope_id, e.packet_id, e.data, e.created_at, e.attempts
     FROM events e WHERE e.id > @after::bigint ORDER BY e.id LIMIT @max_rows::int)
    UNION ALL
    SELECT r.from_position + c.i - 1, 'packet.claimed'::event_type, r.envelope_id, c.packet_id, NULL::jsonb,
           r.created_at,
           CASE WHEN r.from_position + c.i - 1 = r.delivered_through + 1 THEN r.attempts ELSE 0 END
    FROM counted r CROSS JOIN arg a CROSS JOIN LATERAL (
        SELECT k.packet_id, k.i
        FROM unnest(r.packet_ids[r.from_position - r.first_position + 1:]) WITH ORDINALITY AS k(packet_id, i)
        ORDER BY k.i LIMIT a.max_rows - r.before) c
    WHERE r.before < a.max_rows
), page AS (
    SELECT f.id, f.type, f.envelope_id, f.packet_id, f.data, f.created_at, f.attempts
    FROM feed f ORDER BY f.id LIMIT @max_rows::int
)
SELECT p.id::bigint AS id, p.type::event_type AS type, p.envelope_id::bigint AS envelope_id,
       event_json(p.type, p.envelope_id, p.data, c, v.metadata)::jsonb AS data,
       p.created_at::timestamptz AS created_at, p.attempts::int AS attempts
FROM page p
LEFT JOIN claims c ON c.envelope_id = p.envelope_id AND c.packet_id = p.packet_id
LEFT JOIN envelopes v ON v.id = p.envelope_id
ORDER BY p.id;

-- name: DeliveryHeads :many
-- DeliveryHeads walks the envelopes with undelivered events one at a time
-- (a loose index scan of events_pending_idx and claim_event_runs_pending_idx
-- together: two probes per envelope, however many events each has
-- waiting) from the envelope after_envelope on, and returns the first
-- undelivered events of up to max_rows envelopes that are due and not in
-- skip, by envelope. An envelope's first undelivered event is the lower of
-- its first undelivered events row and its first undelivered claim event.
-- The walk is evaluated lazily, so it stops once enough are found.
WITH RECURSIVE walk AS (
    SELECT least(
        (SELECT f.envelope_id FROM events f
         WHERE f.delivered_at IS NULL AND f.envelope_id > @after_envelope ORDER BY f.envelope_id, f.id LIMIT 1),
        (SELECT r.envelope_id FROM claim_event_runs r
         WHERE r.delivered_through < r.last_position AND r.envelope_id > @after_envelope
         ORDER BY r.envelope_id, r.first_position LIMIT 1)) AS envelope_id
    UNION ALL
    SELECT least(
        (SELECT f.envelope_id FROM events f
         WHERE f.delivered_at IS NULL AND f.envelope_id > w.envelope_id ORDER BY f.envelope_id, f.id LIMIT 1),
        (SELECT r.envelope_id FROM claim_event_runs r
         WHERE r.delivered_through < r.last_position AND r.envelope_id > w.envelope_id
         ORDER BY r.envelope_id, r.first_position LIMIT 1))
    FROM walk w WHERE w.envelope_id IS NOT NULL
), heads AS (
    SELECT w.envelope_id, h.id, h.next_attempt_at
    FROM walk w CROSS JOIN LATERAL (
        SELECT x.id, x.next_attempt_at FROM (
            (SELECT f.id, f.next_attempt_at FROM events f
             WHERE f.delivered_at IS NULL AND f.envelope_id = w.envelope_id ORDER BY f.id LIMIT 1)
            UNION ALL
            (SELECT r.delivered_through + 1, r.next_attempt_at FROM claim_event_runs r
             WHERE r.delivered_through < r.last_position AND r.envelope_id = w.envelope_id
             ORDER BY r.first_position LIMIT 1)) x
        ORDER BY x.id LIMIT 1) h
    WHERE w.envelope_id IS NOT NULL
), due AS MATERIALIZED (
    SELECT heads.id FROM heads
    WHERE (heads.next_attempt_at IS NULL OR heads.next_attempt_at <= clock_timestamp())
      AND NOT heads.envelope_id = ANY(@skip::bigint[])
    LIMIT @max_rows
)
SELECT m.id, m.type, m.envelope_id, event_json(m.type, m.envelope_id, m.data, c, v.metadata) AS data,
       m.created_at, m.attempts
FROM due CROSS JOIN LATERAL (
    SELECT e.id, e.type, e.envelope_id, e.packet_id, e.data, e.created_at, e.attempts
    FROM events e WHERE e.id = due.id
    UNION ALL
    SELECT x.id, x.type, x.envelope_id, x.packet_id, x.data, x.created_at, x.attempts
    FROM claim_event_at(due.id) x) m
LEFT JOIN claims c ON c.envelope_id = m.envelope_id AND c.packet_id = m.packet_id
LEFT JOIN envelopes v ON v.id = m.envelope_id
ORDER BY m.envelope_id;

-- name: NextUndelivered :one
-- NextUndelivered is the position of an envelope's first undelivered
-- event, 0 when it has none.
SELECT coalesce(least(
    (SELECT f.id FROM events f WHERE f.envelope_id = @envelope_id AND f.delivered_at IS NULL ORDER BY f.id LIMIT 1),
    (SELECT r.delivered_through + 1 FROM claim_event_runs r
     WHERE r.envelope_id = @envelope_id AND r.delivered_through < r.last_position
     ORDER BY r.first_position LIMIT 1)), 0)::bigint AS id;

-- name: LockDueEvent :one
-- LockDueEvent locks an event for its delivery if it is undelivered, due
-- and locked by no other sender, and returns it; no row otherwise. The
-- event is an events row, or a claim event: then its run is locked, and
-- the event must be the run's next to deliver.
WITH arg AS (
    SELECT @id::bigint AS id
), locked_row AS (
    SELECT e.id, e.type, e.envelope_id, e.packet_id, e.data, e.created_at, e.attempts
    FROM events e, arg a
    WHERE e.id = a.id AND e.delivered_at IS NULL
      AND (e.next_attempt_at IS NULL OR e.next_attempt_at <= clock_timestamp())
    FOR UPDATE OF e SKIP LOCKED
), locked_run AS (
    SELECT r.first_position FROM claim_event_runs r, arg a
    WHERE r.first_position = (SELECT max(x.first_position) FROM claim_event_runs x WHERE x.first_position <= a.id)
      AND r.delivered_through = a.id - 1 AND r.last_position >= a.id
      AND (r.next_attempt_at IS NULL OR r.next_attempt_at <= clock_timestamp())
    FOR UPDATE OF r SKIP LOCKED
), locked AS (
    SELECT w.id, w.type, w.envelope_id, w.packet_id, w.data, w.created_at, w.attempts FROM locked_row w
    UNION ALL
    SELECT c.id, c.type, c.envelope_id, c.packet_id, c.data, c.created_at, c.attempts
    FROM locked_run l CROSS JOIN arg a CROSS JOIN LATERAL claim_event_at(a.id) c
)
SELECT l.id::bigint AS id, l.type::event_type AS type, l.envelope_id::bigint AS envelope_id,
       event_json(l.type, l.envelope_id, l.data, c, v.metadata)::jsonb AS data,
       l.created_at::timestamptz AS created_at, l.attempts::int AS attempts
FROM locked l
LEFT JOIN claims c ON c.envelope_id = l.envelope_id AND c.packet_id = l.packet_id
LEFT JOIN envelopes v ON v.id = l.envelope_id;

-- name: MarkEventDelivered :exec
-- MarkEventDelivered records event id accepted by the receiver: its events
-- row, or its run's delivered_through (the run is locked: LockDueEvent).
WITH arg AS (
    SELECT @id::bigint AS id
), done_row AS (
    UPDATE events e SET delivered_at = clock_timestamp(), next_attempt_at = NULL
    FROM arg a WHERE e.id = a.id
)
UPDATE claim_event_runs r SET delivered_through = a.id, delivered_at = clock_timestamp(), attempts = 0,
    next_attempt_at = NULL, last_error = NULL
FROM arg a
WHERE r.last_position >= a.id AND r.delivered_through = a.id - 1
  AND r.first_position = (SELECT max(x.first_position) FROM claim_event_runs x WHERE x.first_position <= a.id);

-- name: MarkEventFailed :exec
-- MarkEventFailed records a failed delivery attempt of event id and when to
-- try again, on its events row or on its run.
WITH arg AS (
    SELECT @id::bigint AS id, left(@last_error::text, 500) AS last_error,
           clock_timestamp() + (@retry_in_us::bigint) * '1 microsecond'::interval AS next_attempt_at
), failed_row AS (
    UPDATE events e SET attempts = e.attempts + 1, last_error = a.last_error, next_attempt_at = a.next_attempt_at
    FROM arg a WHERE e.id = a.id
)
UPDATE claim_event_runs r SET attempts = r.attempts + 1, last_error = a.last_error, next_attempt_at = a.next_attempt_at
FROM arg a
WHERE r.last_position >= a.id AND r.delivered_through = a.id - 1
  AND r.first_position = (SELECT max(x.first_position) FROM claim_event_runs x WHERE x.first_position <= a.id);

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

-- name: PruneClaimEvents :one
-- PruneClaimEvents is PruneEvents for the claim events of runs: among up to
-- max_rows runs with first positions above after, it deletes those written
-- before cutoff (only those delivered whole when delivered_only; a run goes
-- whole, never in part, which EventsAfter relies on), and returns how many
-- events it deleted, the last position it looked at, and done.
WITH page AS (
    SELECT v.first_position, v.last_position, v.created_at FROM claim_event_runs v
    WHERE v.first_position > @after ORDER BY v.first_position LIMIT @max_rows::int),
gone AS (
    DELETE FROM claim_event_runs r USING page p
    WHERE r.first_position = p.first_position AND r.created_at < @cutoff::timestamptz
      AND (r.delivered_through = r.last_position OR NOT @delivered_only::boolean)
    RETURNING r.last_position - r.first_position + 1 AS n)
SELECT (SELECT coalesce(sum(n), 0) FROM gone)::bigint AS deleted,
       coalesce((SELECT max(first_position) FROM page), @after)::bigint AS last,
       ((SELECT count(*) FROM page) < @max_rows::int
        OR EXISTS (SELECT 1 FROM page p WHERE p.created_at >= @cutoff::timestamptz))::boolean AS done;
