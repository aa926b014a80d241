-- name: EnvelopeClaimsPage :many
-- EnvelopeClaimsPage lists an envelope's claims in hand-out order (Redis
-- hands packets out in descending id order), starting after the packet
-- before_packet_id (exclusive), by the claims' primary key.
SELECT c.packet_id, c.user_id, c.amount_cents, c.order_no, c.claimed_at
FROM claims c
WHERE c.envelope_id = @envelope_id AND c.packet_id < @before_packet_id
ORDER BY c.packet_id DESC
LIMIT @max_rows;

-- name: BestClaim :one
-- BestClaim is an envelope's luckiest grab as best_claim_json writes it (the
-- one definition the events share), JSON null when nothing was claimed.
SELECT best_claim_json(@envelope_id::bigint)::jsonb AS best;

-- name: UserClaimsPage :many
-- UserClaimsPage lists a user's claims newest envelope first, those of
-- envelopes before before_envelope_id (exclusive), by
-- claims_user_envelope_key (a user holds one packet per envelope). The
-- sender is the claim's own; only a claim written before migration 20
-- reads it from its envelope (COALESCE evaluates the lookup only then).
SELECT c.envelope_id,
       coalesce(c.sender_id, (SELECT e.sender_id FROM envelopes e WHERE e.id = c.envelope_id))::text AS sender_id,
       c.packet_id, c.amount_cents, c.order_no, c.claimed_at
FROM claims c
WHERE c.user_id = @user_id::text AND c.envelope_id < @before_envelope_id::bigint
ORDER BY c.envelope_id DESC
LIMIT @max_rows;

-- name: EnvelopeSenders :many
-- EnvelopeSenders is the sender of each of the envelopes that exists, for
-- the claims the flusher writes.
SELECT id, sender_id FROM envelopes WHERE id = ANY(@ids::bigint[]);

-- name: SenderEnvelopesPage :many
-- SenderEnvelopesPage lists a sender's envelopes newest first, those before
-- the key (before_at, before_id) exclusive, by envelopes_sender_idx.
SELECT * FROM envelopes
WHERE sender_id = @sender_id::text
  AND (created_at, id) < (@before_at::timestamptz, @before_id::bigint)
ORDER BY created_at DESC, id DESC
LIMIT @max_rows;

-- name: InsertSplitCommitment :exec
-- InsertSplitCommitment records an envelope's split commitment and its salt.
INSERT INTO split_commitments (envelope_id, salt, commitment) VALUES (@envelope_id, @salt, @commitment);

-- name: SplitCommitmentOf :one
-- SplitCommitmentOf reads an envelope's split commitment and its salt.
SELECT salt, commitment FROM split_commitments WHERE envelope_id = @envelope_id;

-- name: SplitPackets :many
-- SplitPackets lists every packet of an envelope in hand-out order
-- (descending id).
SELECT id, amount_cents FROM packet_pool WHERE envelope_id = @envelope_id ORDER BY id DESC;

-- name: ExportFunded :many
-- ExportFunded lists the envelopes created in [since, until) after the key
-- (after_at, after_id), oldest first: the money their senders put in.
SELECT id, sender_id, total_cents, created_at FROM envelopes
WHERE created_at >= @since::timestamptz AND created_at < @until::timestamptz
  AND (created_at, id) > (@after_at::timestamptz, @after_id::bigint)
ORDER BY created_at, id
LIMIT @max_rows;

-- name: EnvelopeIDRange :one
-- EnvelopeIDRange is the smallest and largest id of the envelopes created
-- in [since, until); ids are handed out as envelopes are created, so every
-- envelope of those times has an id between them.
SELECT coalesce(min(id), 0)::bigint AS lo, coalesce(max(id), -1)::bigint AS hi FROM envelopes
WHERE created_at >= @since::timestamptz AND created_at < @until::timestamptz;

-- name: ExportClaimed :many
-- ExportClaimed lists the claims made in [since, until) of the envelopes
-- with ids in [lo_id, hi_id], after the key (after_envelope_id,
-- after_packet_id), by the claims' primary key.
SELECT c.envelope_id, e.sender_id, c.packet_id, c.user_id, c.amount_cents, c.claimed_at
FROM claims c
JOIN envelopes e ON e.id = c.envelope_id
WHERE c.envelope_id BETWEEN @lo_id::bigint AND @hi_id::bigint
  AND (c.envelope_id, c.packet_id) > (@after_envelope_id::bigint, @after_packet_id::bigint)
  AND c.claimed_at >= @since::timestamptz AND c.claimed_at < @until::timestamptz
ORDER BY c.envelope_id, c.packet_id
LIMIT @max_rows;

-- name: ExportRefunded :many
-- ExportRefunded lists the envelopes settled in [since, until) with money
-- returned to the sender, after the key (after_at, after_id), oldest first.
SELECT id, sender_id, refunded_cents, settled_at::timestamptz AS settled_at FROM envelopes
WHERE settled_at >= @since::timestamptz AND settled_at < @until::timestamptz AND refunded_cents > 0
  AND (settled_at, id) > (@after_at::timestamptz, @after_id::bigint)
ORDER BY settled_at, id
LIMIT @max_rows;
