-- name: AuditPage :many
-- AuditPage is a page of every envelope, keyset-paginated by id, and for
-- each the aggregate of its packets, in one statement: the envelope row and
-- its aggregate are one snapshot and agree with each other even while the
-- flusher writes; different pages may see different moments, which is
-- harmless because every check is about one envelope. AuditPageSince differs
-- only in which envelopes make the page: the aggregate must stay the same in
-- both (internal/audit/query.go explains the plan; a test keeps it).
WITH page AS MATERIALIZED (
    SELECT v.id, v.status, v.count, v.total_cents, v.claimed_cents, v.refunded_cents, v.settled_at,
           v.kind, v.recipients_count, v.starts_at FROM envelopes v
    WHERE v.id > @after ORDER BY v.id LIMIT @max_rows
)
SELECT e.id, e.status, e.count, e.total_cents, e.claimed_cents, e.refunded_cents,
       (e.settled_at IS NOT NULL)::boolean AS has_settled_at,
       a.n, a.cents, a.claimed_n, a.claimed_cents AS packets_claimed_cents, a.refunded_n,
       a.refunded_cents AS packets_refunded_cents, a.claimed_and_refunded, a.users_twice,
       e.kind, e.recipients_count, a.min_cents, a.max_cents, a.not_recipient, a.before_start,
       (SELECT count(*) FROM envelope_recipients r WHERE r.envelope_id = e.id) AS recipient_rows,
       -- Claim rows the packets view cannot show as written: no packet of
       -- that id in the envelope, or another amount than the packet's.
       (SELECT count(*) FROM claims c LEFT JOIN packet_pool q ON q.id = c.packet_id AND q.envelope_id = c.envelope_id
        WHERE c.envelope_id = e.id AND (q.id IS NULL OR q.amount_cents <> c.amount_cents)) AS stray_claims
FROM page e
CROSS JOIN LATERAL (
    SELECT count(*) AS n,
           coalesce(sum(p.amount_cents), 0)::bigint AS cents,
           count(p.claimed_by) AS claimed_n,
           coalesce(sum(p.amount_cents) FILTER (WHERE p.claimed_by IS NOT NULL), 0)::bigint AS claimed_cents,
           count(p.refunded_at) AS refunded_n,
           coalesce(sum(p.amount_cents) FILTER (WHERE p.refunded_at IS NOT NULL), 0)::bigint AS refunded_cents,
           count(*) FILTER (WHERE p.claimed_by IS NOT NULL AND p.refunded_at IS NOT NULL) AS claimed_and_refunded,
           (count(p.claimed_by) - count(DISTINCT p.claimed_by))::bigint AS users_twice,
           coalesce(min(p.amount_cents), 0)::bigint AS min_cents,
           coalesce(max(p.amount_cents), 0)::bigint AS max_cents,
           count(*) FILTER (WHERE p.claimed_by IS NOT NULL AND e.recipients_count > 0 AND NOT EXISTS (
               SELECT 1 FROM envelope_recipients r WHERE r.envelope_id = e.id AND r.user_id = p.claimed_by)) AS not_recipient,
           count(*) FILTER (WHERE p.claimed_at < e.starts_at) AS before_start
    FROM packets p
    WHERE p.envelope_id = e.id
) a
ORDER BY e.id;

-- name: AuditPageSince :many
-- AuditPageSince is a page of the envelopes created or settled at or after
-- since plus every one not in a final state: an envelope that lived longer
-- than the window is checked when it settles, while Redis may still hold
-- its claims. The status list is spelled as in the predicate of
-- envelopes_unsettled_idx so the planner can use that index; it must name
-- every status except the final ones (settled, failed).
WITH page AS MATERIALIZED (
    SELECT v.id, v.status, v.count, v.total_cents, v.claimed_cents, v.refunded_cents, v.settled_at,
           v.kind, v.recipients_count, v.starts_at FROM envelopes v
    WHERE v.id > @after
      AND (v.created_at >= @since OR v.settled_at >= @since
           OR v.status IN ('loading', 'open', 'sold_out', 'expired', 'suspended'))
    ORDER BY v.id LIMIT @max_rows
)
SELECT e.id, e.status, e.count, e.total_cents, e.claimed_cents, e.refunded_cents,
       (e.settled_at IS NOT NULL)::boolean AS has_settled_at,
       a.n, a.cents, a.claimed_n, a.claimed_cents AS packets_claimed_cents, a.refunded_n,
       a.refunded_cents AS packets_refunded_cents, a.claimed_and_refunded, a.users_twice,
       e.kind, e.recipients_count, a.min_cents, a.max_cents, a.not_recipient, a.before_start,
       (SELECT count(*) FROM envelope_recipients r WHERE r.envelope_id = e.id) AS recipient_rows,
       -- Claim rows the packets view cannot show as written: no packet of
       -- that id in the envelope, or another amount than the packet's.
       (SELECT count(*) FROM claims c LEFT JOIN packet_pool q ON q.id = c.packet_id AND q.envelope_id = c.envelope_id
        WHERE c.envelope_id = e.id AND (q.id IS NULL OR q.amount_cents <> c.amount_cents)) AS stray_claims
FROM page e
CROSS JOIN LATERAL (
    SELECT count(*) AS n,
           coalesce(sum(p.amount_cents), 0)::bigint AS cents,
           count(p.claimed_by) AS claimed_n,
           coalesce(sum(p.amount_cents) FILTER (WHERE p.claimed_by IS NOT NULL), 0)::bigint AS claimed_cents,
           count(p.refunded_at) AS refunded_n,
           coalesce(sum(p.amount_cents) FILTER (WHERE p.refunded_at IS NOT NULL), 0)::bigint AS refunded_cents,
           count(*) FILTER (WHERE p.claimed_by IS NOT NULL AND p.refunded_at IS NOT NULL) AS claimed_and_refunded,
           (count(p.claimed_by) - count(DISTINCT p.claimed_by))::bigint AS users_twice,
           coalesce(min(p.amount_cents), 0)::bigint AS min_cents,
           coalesce(max(p.amount_cents), 0)::bigint AS max_cents,
           count(*) FILTER (WHERE p.claimed_by IS NOT NULL AND e.recipients_count > 0 AND NOT EXISTS (
               SELECT 1 FROM envelope_recipients r WHERE r.envelope_id = e.id AND r.user_id = p.claimed_by)) AS not_recipient,
           count(*) FILTER (WHERE p.claimed_at < e.starts_at) AS before_start
    FROM packets p
    WHERE p.envelope_id = e.id
) a
ORDER BY e.id;

-- name: AuditConflicts :many
-- AuditConflicts lists the claims the flusher could not apply, found at or
-- after since. claim_conflicts is small (every row is an incident), so it is
-- read whole, without paging.
SELECT envelope_id, packet_id, user_id, reason, claimed_at, found_at
FROM claim_conflicts WHERE found_at >= @since ORDER BY id;

-- name: AuditOrphans :many
-- AuditOrphans lists, per table and envelope id, the rows keyed by an
-- envelope that does not exist: the tables whose envelope_id is no declared
-- foreign key (envelope_recipients' is). Only ids from min_envelope_id on
-- are looked at: the audit's window passes the smallest id created in it,
-- so that each table is read through its index led by envelope_id; -all
-- passes the smallest bigint and reads them whole. Two tables may hold rows
-- of envelopes that do not exist, by design: idempotency_keys (a key whose
-- envelope retention removed still answers a repeated create) and
-- split_commitments (a create of an earlier version wrote its commitment
-- before the envelope's transaction, and one that failed after it left the
-- commitment behind; now both are in one transaction).
WITH o AS (
    SELECT 'packet_pool'::text AS tbl, p.envelope_id, count(*) AS n FROM packet_pool p
    WHERE p.envelope_id >= @min_envelope_id AND NOT EXISTS (SELECT 1 FROM envelopes e WHERE e.id = p.envelope_id)
    GROUP BY p.envelope_id
    UNION ALL
    SELECT 'claims', c.envelope_id, count(*) FROM claims c
    WHERE c.envelope_id >= @min_envelope_id AND NOT EXISTS (SELECT 1 FROM envelopes e WHERE e.id = c.envelope_id)
    GROUP BY c.envelope_id
    UNION ALL
    SELECT 'claim_event_runs', r.envelope_id, count(*) FROM claim_event_runs r
    WHERE r.envelope_id >= @min_envelope_id AND NOT EXISTS (SELECT 1 FROM envelopes e WHERE e.id = r.envelope_id)
    GROUP BY r.envelope_id
    UNION ALL
    SELECT 'events', v.envelope_id, count(*) FROM events v
    WHERE v.envelope_id >= @min_envelope_id AND NOT EXISTS (SELECT 1 FROM envelopes e WHERE e.id = v.envelope_id)
    GROUP BY v.envelope_id
    UNION ALL
    SELECT 'claim_conflicts', k.envelope_id, count(*) FROM claim_conflicts k
    WHERE k.envelope_id >= @min_envelope_id AND NOT EXISTS (SELECT 1 FROM envelopes e WHERE e.id = k.envelope_id)
    GROUP BY k.envelope_id
)
SELECT o.tbl::text AS tbl, o.envelope_id::bigint AS envelope_id, o.n::bigint AS n
FROM o ORDER BY o.envelope_id, o.tbl LIMIT @max_rows::int;

-- name: AuditFirstEnvelopeSince :one
-- AuditFirstEnvelopeSince is the smallest id of the envelopes created at or
-- after since, or one past the largest id when there is none: ids are handed
-- out as envelopes are created, so the rows of an envelope created in the
-- window that has gone have ids from it on.
SELECT coalesce((SELECT min(v.id) FROM envelopes v WHERE v.created_at >= @since::timestamptz),
                (SELECT max(v.id) + 1 FROM envelopes v), 0)::bigint AS id;

-- name: SettledClaims :many
-- SettledClaims reads the claims PostgreSQL holds for the envelopes: one
-- range of the claims' primary key per envelope. An order number it does
-- not hold reads as "".
SELECT c.envelope_id, c.user_id, c.packet_id, c.amount_cents, coalesce(c.order_no, '')::text AS order_no
FROM claims c
WHERE c.envelope_id = ANY(@envelope_ids::bigint[]);
