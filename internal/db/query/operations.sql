-- What the flushers export as metrics but several processes change (see
-- migration 000006): settlement totals, the last audit, the envelopes
-- suspended now and the webhook backlog.

-- name: AddSettlementTotals :exec
-- AddSettlementTotals counts one settlement (status settled or failed) and
-- its money, in the settling transaction. The sums are numeric (migration
-- 000023): a running total for the life of the service outgrows bigint.
INSERT INTO settlement_totals AS t (status, envelopes, claimed_cents, refunded_cents)
VALUES (@status, 1, @claimed_cents::bigint, @refunded_cents::bigint)
ON CONFLICT (status) DO UPDATE SET envelopes = t.envelopes + 1,
    claimed_cents = t.claimed_cents + excluded.claimed_cents,
    refunded_cents = t.refunded_cents + excluded.refunded_cents;

-- name: SettlementTotals :many
-- SettlementTotals reads the totals of every final status, the cents as
-- the float a metric holds (the numeric sums may pass int64's range).
SELECT status, envelopes, claimed_cents::float8 AS claimed_cents,
    refunded_cents::float8 AS refunded_cents
FROM settlement_totals;

-- name: CountSuspended :one
-- CountSuspended counts the envelopes suspended now (the partial index of
-- unfinished envelopes covers them).
SELECT count(*) FROM envelopes WHERE status = 'suspended';

-- name: LastAudit :one
-- LastAudit reads the outcome of the last `flusher audit`.
SELECT finished_at, violations FROM audit_last_run;

-- name: RecordAudit :exec
-- RecordAudit replaces the outcome of the last `flusher audit`.
INSERT INTO audit_last_run (only_row, finished_at, violations, suspended, envelopes, all_envelopes)
VALUES (true, @finished_at::timestamptz, @violations, @suspended, @envelopes, @all_envelopes)
ON CONFLICT (only_row) DO UPDATE SET finished_at = excluded.finished_at, violations = excluded.violations,
    suspended = excluded.suspended, envelopes = excluded.envelopes, all_envelopes = excluded.all_envelopes;

-- name: CountUndeliveredEvents :one
-- CountUndeliveredEvents counts the events no webhook receiver accepted yet,
-- up to a cap: while a receiver is down the backlog can hold millions, and a
-- scrape must stay cheap. Claim events count from their runs: each run
-- holds last_position - delivered_through undelivered ones.
WITH arg AS (SELECT @cap::bigint AS cap)
SELECT least(a.cap,
    (SELECT count(*) FROM (SELECT 1 FROM events WHERE delivered_at IS NULL LIMIT (SELECT cap FROM arg)) AS pending)
    + (SELECT coalesce(sum(r.n), 0) FROM (
        SELECT x.last_position - x.delivered_through AS n FROM claim_event_runs x
        WHERE x.delivered_through < x.last_position LIMIT (SELECT cap FROM arg)) r))::bigint AS pending
FROM arg a;

-- name: SettlementOverdueSeconds :one
-- SettlementOverdueSeconds is how long ago the oldest envelope still
-- waiting for its settlement expired, 0 when none has: a flusher settles an
-- expired envelope within seconds, so a growing figure is an envelope whose
-- settlement keeps failing (or whose shard no flusher reaches), its refund
-- with it. Suspended envelopes wait for an operator and are counted apart
-- (CountSuspended). The partial index of unfinished envelopes serves it in
-- expiry order.
SELECT coalesce(extract(epoch FROM now() - min(expires_at)), 0)::float8 AS overdue_seconds
FROM envelopes
WHERE status IN ('loading', 'open', 'sold_out', 'expired') AND expires_at < now();
