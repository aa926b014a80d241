-- name: MarkExpired :exec
-- MarkExpired records that an open envelope was closed; it waits for its
-- last claims before it is settled.
UPDATE envelopes SET status = 'expired' WHERE id = @id AND status = 'open';

-- name: LockForSettlement :one
-- LockForSettlement locks an envelope's row for its settlement.
SELECT status, total_cents, claimed_cents, coalesce(best_packet_id, 0)::bigint AS best_packet_id
FROM envelopes WHERE id = @id FOR UPDATE;

-- name: RefundUnclaimed :execrows
-- RefundUnclaimed marks an envelope's unclaimed packets refunded.
UPDATE packet_pool p SET refunded_at = @refunded_at::timestamptz
WHERE p.envelope_id = @envelope_id AND p.refunded_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM claims c WHERE c.envelope_id = p.envelope_id AND c.packet_id = p.id);

-- name: PacketSums :one
-- PacketSums adds up an envelope's claimed and refunded packets, and finds
-- its luckiest grab among them (0 when nothing was claimed): the settlement
-- checks the envelope row against its packets, and its best too.
WITH best AS (
    SELECT p.id, p.amount_cents FROM packets p
    WHERE p.envelope_id = @envelope_id AND p.claimed_by IS NOT NULL
    ORDER BY p.amount_cents DESC, p.id DESC
    LIMIT 1
)
SELECT coalesce(sum(s.amount_cents) FILTER (WHERE s.claimed_by IS NOT NULL), 0)::bigint AS claimed_cents,
       coalesce(sum(s.amount_cents) FILTER (WHERE s.refunded_at IS NOT NULL), 0)::bigint AS refunded_cents,
       coalesce((SELECT b.id FROM best b), 0)::bigint AS best_packet_id,
       coalesce((SELECT b.amount_cents FROM best b), 0)::bigint AS best_amount_cents
FROM packets s
WHERE s.envelope_id = @envelope_id;

-- name: RecordSettlement :one
-- RecordSettlement records a settlement (status settled or failed), the
-- luckiest grab PacketSums found (0: none), and its envelope.settled event,
-- and returns how many envelopes it changed.
WITH changed AS (
    UPDATE envelopes e SET status = @status, refunded_cents = @refunded_cents, settled_at = @settled_at::timestamptz,
        best_packet_id = nullif(@best_packet_id::bigint, 0), best_amount_cents = nullif(@best_amount_cents::bigint, 0)
    WHERE e.id = @id
    RETURNING e.id, e.sender_id, e.status, e.total_cents, e.claimed_cents, e.refunded_cents, e.settled_at
), new_events AS (
    SELECT 1 AS kind, now() AS at, id AS ref, 'envelope.settled'::event_type AS type, id AS envelope_id,
           NULL::bigint AS packet_id, jsonb_build_object('envelope_id', id, 'sender_id', sender_id, 'status', status,
               'total_cents', total_cents, 'claimed_cents', claimed_cents, 'refunded_cents', refunded_cents,
               'settled_at', to_char(settled_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) AS data
    FROM changed
)
, event_base AS (SELECT take_event_ids(count(*)) AS base FROM new_events)
, event_rows AS (
    INSERT INTO events (id, type, envelope_id, packet_id, data)
    SELECT b.base + row_number() OVER (ORDER BY n.kind, n.at, n.ref), n.type, n.envelope_id, n.packet_id, n.data
    FROM new_events n CROSS JOIN event_base b
    RETURNING id
)
SELECT count(*) FROM changed;

-- name: Suspend :one
-- Suspend marks an envelope suspended and writes its envelope.suspended
-- event, only if it was loading, open, sold out or expired (a sold-out one
-- whose settlement found its cents disagreeing with its packets); it returns
-- how many envelopes it changed.
WITH changed AS (
    UPDATE envelopes e SET status = 'suspended', suspended_at = @suspended_at::timestamptz, suspend_reason = @reason::text
    WHERE e.id = @id AND e.status IN ('loading', 'open', 'sold_out', 'expired')
    RETURNING e.id, e.suspend_reason, e.suspended_at
), new_events AS (
    SELECT 1 AS kind, now() AS at, id AS ref, 'envelope.suspended'::event_type AS type, id AS envelope_id,
           NULL::bigint AS packet_id, jsonb_build_object('envelope_id', id, 'reason', suspend_reason,
               'suspended_at', to_char(suspended_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) AS data
    FROM changed
)
, event_base AS (SELECT take_event_ids(count(*)) AS base FROM new_events)
, event_rows AS (
    INSERT INTO events (id, type, envelope_id, packet_id, data)
    SELECT b.base + row_number() OVER (ORDER BY n.kind, n.at, n.ref), n.type, n.envelope_id, n.packet_id, n.data
    FROM new_events n CROSS JOIN event_base b
    RETURNING id
)
SELECT count(*) FROM changed;

-- name: Reopen :one
-- Reopen moves a suspended envelope back to open or sold out and writes
-- envelope.recovered, and envelope.sold_out when that is its new status and
-- none was written before (its last packet was claimed while it was
-- suspended, when no sold_out event could be written; one suspended after
-- it sold out has its event already). No row when it was not suspended.
WITH changed AS (
    UPDATE envelopes e
    SET status = CASE WHEN e.claimed_cents = e.total_cents THEN 'sold_out' ELSE 'open' END,
        suspended_at = NULL, suspend_reason = NULL
    WHERE e.id = @id AND e.status = 'suspended'
    RETURNING e.id, e.status, e.count, e.total_cents
), new_events AS (
    SELECT 1 AS kind, now() AS at, id AS ref, 'envelope.recovered'::event_type AS type, id AS envelope_id,
           NULL::bigint AS packet_id, jsonb_build_object('envelope_id', id, 'action', 'reload', 'status', status) AS data
    FROM changed
    UNION ALL
    SELECT 2, now(), id, 'envelope.sold_out'::event_type, id, NULL,
           jsonb_build_object('envelope_id', id, 'count', count, 'total_cents', total_cents)
    FROM changed c WHERE c.status = 'sold_out'
      AND NOT EXISTS (SELECT 1 FROM events v WHERE v.envelope_id = c.id AND v.type = 'envelope.sold_out')
)
, event_base AS (SELECT take_event_ids(count(*)) AS base FROM new_events)
, event_rows AS (
    INSERT INTO events (id, type, envelope_id, packet_id, data)
    SELECT b.base + row_number() OVER (ORDER BY n.kind, n.at, n.ref), n.type, n.envelope_id, n.packet_id, n.data
    FROM new_events n CROSS JOIN event_base b
    RETURNING id
)
SELECT status FROM changed;

-- name: HeldClaims :many
-- HeldClaims lists an envelope's claimed packets.
SELECT c.user_id, c.packet_id, c.amount_cents, c.claimed_at, coalesce(c.order_no, '')::text AS order_no
FROM claims c
WHERE c.envelope_id = @envelope_id
ORDER BY c.packet_id;

-- name: UserClaim :one
-- UserClaim reads the packet a user holds in an envelope.
SELECT c.user_id, c.packet_id, c.amount_cents, c.claimed_at, coalesce(c.order_no, '')::text AS order_no
FROM claims c
WHERE c.envelope_id = @envelope_id AND c.user_id = @user_id::text;

-- name: Epochs :many
-- Epochs lists the token recorded for each shard.
SELECT shard, epoch FROM redis_epochs;

-- name: SetEpoch :execrows
-- SetEpoch records a shard's token, replacing only the one the caller read
-- (was; an empty string for none yet): two flushers that both found a
-- shard's data lost agree on one new token.
INSERT INTO redis_epochs (shard, epoch) VALUES (@shard, @epoch)
ON CONFLICT (shard) DO UPDATE SET epoch = excluded.epoch, updated_at = now()
WHERE redis_epochs.epoch = @was::text;

-- name: LockRecovery :exec
-- LockRecovery waits for, then takes, the session lock of an envelope's
-- recovery (`flusher recover`), so that two recoveries of one envelope never
-- interleave; it is held until the session ends. The class is "rprc" (the flushers' leases are other classes);
-- envelopes whose ids agree modulo 2^31 - 1
-- share a lock, which only makes them wait for each other.
SELECT pg_advisory_lock(1919971939, mod(@envelope_id::bigint, 2147483647)::int);

-- name: LedgerSums :one
-- LedgerSums reads an envelope's recorded cents beside its packets', as a
-- settlement would find them once it refunded every unclaimed packet
-- (PacketSums after RefundUnclaimed): the claimed packets' cents, and those
-- plus the refunded ones' (a packet both claimed and refunded counts twice,
-- as there). A recovery refuses an envelope no settlement could finish.
SELECT e.claimed_cents, e.total_cents,
       coalesce(sum(p.amount_cents) FILTER (WHERE p.claimed_by IS NOT NULL), 0)::bigint AS packets_claimed_cents,
       (coalesce(sum(p.amount_cents) FILTER (WHERE p.claimed_by IS NOT NULL), 0)
        + coalesce(sum(p.amount_cents) FILTER (WHERE p.claimed_by IS NULL OR p.refunded_at IS NOT NULL), 0))::bigint
           AS packets_settled_cents
FROM envelopes e
LEFT JOIN packets p ON p.envelope_id = e.id
WHERE e.id = @id
GROUP BY e.id;
