-- name: InsertEnvelope :exec
-- InsertEnvelope writes a new envelope, loading until its pool is in Redis.
INSERT INTO envelopes (id, shard, share_code, sender_id, total_cents, count, status, created_at, expires_at,
                       kind, recipients_count, password_digest, greeting, metadata, starts_at)
VALUES (@id, @shard, @share_code, @sender_id, @total_cents, @count, 'loading', @created_at, @expires_at,
        @kind, @recipients_count, @password_digest, @greeting, @metadata, @starts_at);

-- name: InsertRecipients :exec
-- InsertRecipients writes the users who may grab an envelope.
INSERT INTO envelope_recipients (envelope_id, user_id)
SELECT @envelope_id, u FROM unnest(@user_ids::text[]) AS u;

-- name: Recipients :many
-- Recipients lists the users who may grab an envelope (none: anyone may).
SELECT user_id FROM envelope_recipients WHERE envelope_id = @envelope_id ORDER BY user_id;

-- name: CloseEnvelope :execrows
-- CloseEnvelope records the sender's early close of an open or suspended
-- envelope, once: closed_at is set and expires_at moved to it, so the
-- flusher settles it as an expired one. It changes no other envelope.
UPDATE envelopes SET closed_at = @closed_at::timestamptz, expires_at = least(expires_at, @closed_at::timestamptz)
WHERE id = @id AND closed_at IS NULL AND status IN ('open', 'suspended');

-- name: InsertPackets :copyfrom
-- InsertPackets writes an envelope's packets with COPY.
INSERT INTO packet_pool (id, envelope_id, amount_cents) VALUES (@id, @envelope_id, @amount_cents);

-- name: MarkLoaded :one
-- MarkLoaded moves a loading envelope to open, or to sold_out (with its
-- envelope.sold_out event) when every packet was grabbed and flushed before
-- it ran; claims applied while it was loading could not make it sold out.
-- The row is locked first so that was is the status this statement changed.
-- It returns the status afterwards; no row when there is no such envelope.
WITH before AS (SELECT l.id, l.status FROM envelopes l WHERE l.id = @id FOR UPDATE),
changed AS (
    UPDATE envelopes e
    SET status = CASE WHEN e.status <> 'loading' THEN e.status
                      WHEN e.claimed_cents = e.total_cents THEN 'sold_out'
                      ELSE 'open' END
    FROM before b WHERE e.id = b.id
    RETURNING e.id, e.status, b.status AS was, e.count, e.total_cents
), new_events AS (
    SELECT 1 AS kind, now() AS at, id AS ref, 'envelope.sold_out'::event_type AS type, id AS envelope_id,
           NULL::bigint AS packet_id, jsonb_build_object('envelope_id', id, 'count', count, 'total_cents', total_cents) AS data
    FROM changed WHERE was = 'loading' AND status = 'sold_out'
)
, event_base AS (SELECT take_event_ids(count(*)) AS base FROM new_events)
, event_rows AS (
    INSERT INTO events (id, type, envelope_id, packet_id, data)
    SELECT b.base + row_number() OVER (ORDER BY n.kind, n.at, n.ref), n.type, n.envelope_id, n.packet_id, n.data
    FROM new_events n CROSS JOIN event_base b
    RETURNING id
)
SELECT status FROM changed;

-- name: EnvelopeByID :one
SELECT * FROM envelopes WHERE id = @id;

-- name: EnvelopeByShareCode :one
SELECT * FROM envelopes WHERE share_code = @share_code::text;

-- name: UnclaimedPackets :many
-- UnclaimedPackets lists an envelope's packets nobody claimed and that were
-- not refunded, in id order.
SELECT p.id, p.amount_cents FROM packet_pool p
WHERE p.envelope_id = @envelope_id AND p.refunded_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM claims c WHERE c.envelope_id = p.envelope_id AND c.packet_id = p.id)
ORDER BY p.id;

-- name: ClaimedCount :one
-- ClaimedCount counts an envelope's claimed packets (index-only on the
-- claims' primary key).
SELECT count(*) FROM claims WHERE envelope_id = @envelope_id;

-- name: UnsettledEnvelopes :many
-- UnsettledEnvelopes lists a shard's envelopes whose state may live only in
-- Redis: loading, open or expired (sold-out ones are wholly in PostgreSQL).
SELECT * FROM envelopes
WHERE status IN ('loading', 'open', 'expired') AND shard = @shard
ORDER BY id;

-- name: DueForSettlement :many
-- DueForSettlement lists envelopes of the shards to settle at now: sold out,
-- or open or expired past their expiry, soonest first.
SELECT * FROM envelopes
WHERE status IN ('open', 'expired', 'sold_out') AND (expires_at <= @now OR status = 'sold_out')
  AND shard = ANY(@shards::int[])
ORDER BY expires_at LIMIT @max_rows;

-- name: LoadingEnvelopes :many
-- LoadingEnvelopes lists envelopes of the shards still loading that were
-- created before a time.
SELECT * FROM envelopes
WHERE status = 'loading' AND created_at < @created_before AND shard = ANY(@shards::int[])
ORDER BY id LIMIT @max_rows;

-- name: ClaimedCents :many
-- ClaimedCents reads the claimed cents and status of several envelopes.
SELECT id, claimed_cents, status FROM envelopes WHERE id = ANY(@ids::bigint[]);
