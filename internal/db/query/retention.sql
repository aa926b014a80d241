-- name: RetentionLockBatch :many
-- RetentionLockBatch locks, oldest settlement first, up to max_rows
-- envelopes settled (or failed: given up while loading, everything
-- refunded) before cutoff and not before after_at, and skips those
-- another transaction holds (a concurrent retention run). An envelope with
-- an idempotency key live at now and no answer recorded waits until the key
-- expires: a repeat of its create rebuilds the answer from it. With
-- delivered_only (a webhook is configured) an envelope with an event the
-- receiver has not accepted waits until it has. It walks
-- envelopes_settled_at_idx in order and stops at max_rows: ordered by
-- (settled_at, id), it would sort every envelope due for each batch. The
-- rows of an envelope it locks are deleted in the same transaction, so
-- after_at (the last batch's latest settlement) never makes it find one
-- twice. RetentionDue must select the same envelopes, but for skip_ids: the
-- envelopes this run found unbalanced, left in place.
SELECT v.id, v.settled_at::timestamptz AS settled_at
FROM envelopes v
WHERE v.status IN ('settled', 'failed') AND v.settled_at < @cutoff::timestamptz AND v.settled_at >= @after_at::timestamptz
  AND v.id <> ALL(coalesce(@skip_ids::bigint[], '{}'))
  AND NOT EXISTS (SELECT 1 FROM idempotency_keys k
      WHERE k.envelope_id = v.id AND k.response_body IS NULL AND k.expires_at > @now::timestamptz)
  AND (NOT @delivered_only::boolean OR NOT EXISTS (
      SELECT 1 FROM events e WHERE e.envelope_id = v.id AND e.delivered_at IS NULL)
    AND NOT EXISTS (
      SELECT 1 FROM claim_event_runs r WHERE r.envelope_id = v.id AND r.delivered_through < r.last_position))
ORDER BY v.settled_at
LIMIT @max_rows::int
FOR UPDATE OF v SKIP LOCKED;

-- name: RetentionDue :one
-- RetentionDue is what a retention run would remove: up to max_rows of the
-- envelopes RetentionLockBatch selects, their cents and their packets. It
-- locks nothing (a dry run).
WITH due AS (
    SELECT v.id, v.total_cents, v.claimed_cents, v.refunded_cents
    FROM envelopes v
    WHERE v.status IN ('settled', 'failed') AND v.settled_at < @cutoff::timestamptz
      AND NOT EXISTS (SELECT 1 FROM idempotency_keys k
          WHERE k.envelope_id = v.id AND k.response_body IS NULL AND k.expires_at > @now::timestamptz)
      AND (NOT @delivered_only::boolean OR NOT EXISTS (
          SELECT 1 FROM events e WHERE e.envelope_id = v.id AND e.delivered_at IS NULL)
        AND NOT EXISTS (
          SELECT 1 FROM claim_event_runs r WHERE r.envelope_id = v.id AND r.delivered_through < r.last_position))
    ORDER BY v.settled_at
    LIMIT @max_rows::int
)
SELECT count(*) AS envelopes,
       coalesce(sum(d.total_cents), 0)::bigint AS total_cents,
       coalesce(sum(d.claimed_cents), 0)::bigint AS claimed_cents,
       coalesce(sum(d.refunded_cents), 0)::bigint AS refunded_cents,
       (SELECT count(*) FROM packet_pool p WHERE p.envelope_id IN (SELECT due.id FROM due)) AS packets
FROM due d;

-- name: RetentionSetBatch :exec
-- RetentionSetBatch names the envelopes the RetentionCopy statements archive,
-- until the transaction ends: COPY takes no parameters.
SELECT set_config('redpacket.retention_envelopes', array_to_string(@envelope_ids::bigint[], ','), true);

-- name: RetentionColumns :many
-- RetentionColumns lists a table's columns in the order SELECT * and COPY
-- write them, for the archive's manifest.
SELECT a.attname::text AS name
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = to_regclass(@table_name::text) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum;

-- The RetentionCopy statements write the rows of the envelopes
-- RetentionSetBatch named, in PostgreSQL's COPY text format, for the archive.
-- They are run with pgconn's CopyTo (internal/retention), never with their
-- generated methods: COPY ... TO STDOUT streams its rows to the client. Each
-- table that holds rows of an envelope has one, and RetentionDelete deletes
-- the same rows (a test compares the list with the catalog).

-- name: RetentionCopyEnvelopes :exec
COPY (SELECT * FROM envelopes WHERE id = ANY(string_to_array(current_setting('redpacket.retention_envelopes'), ',')::bigint[]) ORDER BY id) TO STDOUT;

-- name: RetentionCopyPackets :exec
COPY (SELECT * FROM packets WHERE envelope_id = ANY(string_to_array(current_setting('redpacket.retention_envelopes'), ',')::bigint[]) ORDER BY id) TO STDOUT;

-- name: RetentionCopyRecipients :exec
COPY (SELECT * FROM envelope_recipients WHERE envelope_id = ANY(string_to_array(current_setting('redpacket.retention_envelopes'), ',')::bigint[]) ORDER BY envelope_id, user_id) TO STDOUT;

-- name: RetentionCopyCommitments :exec
COPY (SELECT * FROM split_commitments WHERE envelope_id = ANY(string_to_array(current_setting('redpacket.retention_envelopes'), ',')::bigint[]) ORDER BY envelope_id) TO STDOUT;

-- name: RetentionCopyEvents :exec
-- Both kinds of events, as events rows: loaded back into events, the claim
-- events of runs become rows of their own, which every reader serves.
COPY (SELECT * FROM (SELECT * FROM events WHERE envelope_id = ANY(string_to_array(current_setting('redpacket.retention_envelopes'), ',')::bigint[])
      UNION ALL
      SELECT * FROM claim_events WHERE envelope_id = ANY(string_to_array(current_setting('redpacket.retention_envelopes'), ',')::bigint[])) e
      ORDER BY id) TO STDOUT;

-- name: RetentionCopyConflicts :exec
COPY (SELECT * FROM claim_conflicts WHERE envelope_id = ANY(string_to_array(current_setting('redpacket.retention_envelopes'), ',')::bigint[]) ORDER BY id) TO STDOUT;

-- name: RetentionDelete :one
-- RetentionDelete deletes the rows of the envelopes of envelope_ids that are
-- still settled (or failed) before cutoff (the caller holds their rows
-- locked), from every table the RetentionCopy statements read, and returns
-- what it deleted: the count of each table and the cents, to be compared
-- with the archive, and the claims rows and cents beside the claimed
-- packets' (a claims row the packets view does not show as written, with
-- no packet of its envelope or another amount, is in no file).
-- The foreign key of envelope_recipients is checked at the statement's end,
-- when both sides are gone.
WITH ids AS MATERIALIZED (
    SELECT v.id FROM envelopes v
    WHERE v.id = ANY(@envelope_ids::bigint[]) AND v.status IN ('settled', 'failed') AND v.settled_at < @cutoff::timestamptz
),
gone_claims AS (
    DELETE FROM claims c WHERE c.envelope_id IN (SELECT ids.id FROM ids)
    RETURNING c.envelope_id, c.packet_id, c.amount_cents
),
gone_packets AS (
    DELETE FROM packet_pool p WHERE p.envelope_id IN (SELECT ids.id FROM ids)
    RETURNING p.id, p.envelope_id, p.amount_cents, p.refunded_at
),
claimed_packets AS (
    SELECT g.amount_cents FROM gone_packets g
    WHERE (g.envelope_id, g.id) IN (SELECT k.envelope_id, k.packet_id FROM gone_claims k)
),
gone_recipients AS (
    DELETE FROM envelope_recipients r WHERE r.envelope_id IN (SELECT ids.id FROM ids) RETURNING r.envelope_id
),
gone_commitments AS (
    DELETE FROM split_commitments c WHERE c.envelope_id IN (SELECT ids.id FROM ids) RETURNING c.envelope_id
),
gone_events AS (
    DELETE FROM events e WHERE e.envelope_id IN (SELECT ids.id FROM ids) RETURNING e.id
),
gone_runs AS (
    DELETE FROM claim_event_runs r WHERE r.envelope_id IN (SELECT ids.id FROM ids)
    RETURNING r.last_position - r.first_position + 1 AS n
),
gone_conflicts AS (
    DELETE FROM claim_conflicts k WHERE k.envelope_id IN (SELECT ids.id FROM ids) RETURNING k.id
),
gone_envelopes AS (
    DELETE FROM envelopes v WHERE v.id IN (SELECT ids.id FROM ids)
    RETURNING v.total_cents, v.claimed_cents, v.refunded_cents
)
SELECT (SELECT count(*) FROM gone_envelopes) AS envelopes,
       (SELECT coalesce(sum(g.total_cents), 0) FROM gone_envelopes g)::bigint AS total_cents,
       (SELECT coalesce(sum(g.claimed_cents), 0) FROM gone_envelopes g)::bigint AS claimed_cents,
       (SELECT coalesce(sum(g.refunded_cents), 0) FROM gone_envelopes g)::bigint AS refunded_cents,
       (SELECT count(*) FROM gone_packets) AS packets,
       (SELECT coalesce(sum(g.amount_cents), 0) FROM gone_packets g)::bigint AS packet_cents,
       (SELECT coalesce(sum(g.amount_cents), 0) FROM claimed_packets g)::bigint AS packet_claimed_cents,
       (SELECT count(*) FROM claimed_packets) AS claimed_packets,
       (SELECT count(*) FROM gone_claims) AS claims,
       (SELECT coalesce(sum(k.amount_cents), 0) FROM gone_claims k)::bigint AS claims_cents,
       (SELECT coalesce(sum(g.amount_cents) FILTER (WHERE g.refunded_at IS NOT NULL), 0) FROM gone_packets g)::bigint
           AS packet_refunded_cents,
       (SELECT count(*) FROM gone_recipients) AS recipients,
       (SELECT count(*) FROM gone_commitments) AS commitments,
       ((SELECT count(*) FROM gone_events) + (SELECT coalesce(sum(g.n), 0) FROM gone_runs g))::bigint AS events,
       (SELECT count(*) FROM gone_conflicts) AS conflicts;
