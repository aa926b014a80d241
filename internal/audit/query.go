package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pageColumns reads a page of envelopes and, for each, the aggregate of its
// packets. The envelope row and its aggregate come from one statement, so they
// are one snapshot and agree with each other even while the flusher writes;
// different pages may see different moments, which is harmless because every
// check is about one envelope.
//
// The aggregate is a LATERAL subquery per envelope, so PostgreSQL runs it as a
// nested loop driven by the page: each envelope's packets are found through
// packets_envelope_user_key (envelope_id, claimed_by), never by scanning
// packets. The page is a MATERIALIZED CTE so that it is planned on its own:
// inlined, the planner sometimes preferred a parallel sequential scan of
// envelopes for the last page of a run, because that path's lower row
// estimate made the nested loop above it look cheaper.
//
// EXPLAIN ANALYZE, PostgreSQL 15, 2,000 envelopes of 100 packets (200,000
// packets) plus 300,000 envelopes without packets, ANALYZEd, page of 500:
//
//	Sort (by id; the CTE scan does not carry the order)
//	  CTE page
//	    -> Limit -> Index Scan using envelopes_pkey on envelopes (id > $1)
//	  -> Nested Loop (rows=500)
//	       -> CTE Scan on page e
//	       -> Aggregate (loops=500)
//	            -> Index Scan using packets_envelope_user_key on packets p (rows=100 loops=500)
//	                 Index Cond: (envelope_id = e.id)
//
// About 20 ms for a page of 50,000 packets, on the first, middle and last
// pages alike. When an envelope's packets are spread over the heap the inner
// scan may become a Bitmap Index Scan on the same index. With Since set, the
// page comes from a BitmapOr of envelopes_created_at_idx and
// envelopes_unsettled_idx, sorted by id (a sequential scan when envelopes is
// small); the packets side is the same. Each such page re-reads the window's
// bitmap, which stays cheap for windows of a few hundred thousand envelopes.
// TestPageQueryUsesPacketsIndex keeps this true.
//
// users_twice counts claimed packets beyond each user's first and
// claimed_and_refunded the packets carrying both marks: constraints rule both
// out, which is exactly why the audit must not assume them.
const pageColumns = `
SELECT e.id, e.status, e.count, e.total_cents, e.claimed_cents, e.refunded_cents,
       e.settled_at IS NOT NULL,
       a.n, a.cents, a.claimed_n, a.claimed_cents, a.refunded_n, a.refunded_cents,
       a.claimed_and_refunded, a.users_twice
FROM page e
CROSS JOIN LATERAL (
    SELECT count(*) AS n,
           coalesce(sum(p.amount_cents), 0)::bigint AS cents,
           count(p.claimed_by) AS claimed_n,
           coalesce(sum(p.amount_cents) FILTER (WHERE p.claimed_by IS NOT NULL), 0)::bigint AS claimed_cents,
           count(p.refunded_at) AS refunded_n,
           coalesce(sum(p.amount_cents) FILTER (WHERE p.refunded_at IS NOT NULL), 0)::bigint AS refunded_cents,
           count(*) FILTER (WHERE p.claimed_by IS NOT NULL AND p.refunded_at IS NOT NULL) AS claimed_and_refunded,
           count(p.claimed_by) - count(DISTINCT p.claimed_by) AS users_twice
    FROM packets p
    WHERE p.envelope_id = e.id
) a
ORDER BY e.id`

// envelopeColumns are the envelope columns the checks read.
const envelopeColumns = `id, status, count, total_cents, claimed_cents, refunded_cents, settled_at`

// pageAll is a page of every envelope, keyset-paginated by id.
const pageAll = `
WITH page AS MATERIALIZED (
    SELECT ` + envelopeColumns + ` FROM envelopes WHERE id > $1 ORDER BY id LIMIT $2
)` + pageColumns

// pageSince is a page of the envelopes created at or after $3 plus every one
// not in a final state. The status list is spelled as in the predicate of
// envelopes_unsettled_idx so the planner can use that index; it must name
// every status except the final ones (settled, failed).
const pageSince = `
WITH page AS MATERIALIZED (
    SELECT ` + envelopeColumns + ` FROM envelopes
    WHERE id > $1
      AND (created_at >= $3 OR status IN ('loading', 'open', 'sold_out', 'expired', 'suspended'))
    ORDER BY id LIMIT $2
)` + pageColumns

// readPage returns up to limit envelopes in scope with id > after, by id.
func readPage(ctx context.Context, pool *pgxpool.Pool, since time.Time, after int64, limit int) ([]envelopeRow, error) {
	query, args := pageAll, []any{after, limit}
	if !since.IsZero() {
		query, args = pageSince, append(args, since)
	}
	rows, err := pool.Query(ctx, query, args...)
	if err != nil {
		return nil, wrap(fmt.Sprintf("read envelopes after %d", after), err)
	}
	out, err := pgx.CollectRows(rows, scanEnvelopeRow)
	if err != nil {
		return nil, wrap(fmt.Sprintf("read envelopes after %d", after), err)
	}
	return out, nil
}

func scanEnvelopeRow(row pgx.CollectableRow) (envelopeRow, error) {
	var r envelopeRow
	p := &r.Packets
	err := row.Scan(&r.ID, &r.Status, &r.Count, &r.TotalCents, &r.ClaimedCents, &r.RefundedCents,
		&r.HasSettledAt, &p.N, &p.Cents, &p.ClaimedN, &p.ClaimedCents, &p.RefundedN, &p.RefundedCents,
		&p.ClaimedAndRefunded, &p.UsersTwice)
	return r, err
}

// conflictsQuery reads the claims the flusher could not apply. claim_conflicts
// is small (every row is an incident), so it is read whole, without paging.
const conflictsQuery = `
SELECT envelope_id, packet_id, user_id, reason, claimed_at, found_at
FROM claim_conflicts
WHERE found_at >= $1
ORDER BY id`

// readConflicts returns one "conflict" violation per claim_conflicts row
// found at or after since (every row when since is zero).
func readConflicts(ctx context.Context, pool *pgxpool.Pool, since time.Time) ([]Violation, error) {
	from := pgtype.Timestamptz{Time: since, Valid: true}
	if since.IsZero() {
		from = pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	}
	rows, err := pool.Query(ctx, conflictsQuery, from)
	if err != nil {
		return nil, wrap("read claim conflicts", err)
	}
	out, err := pgx.CollectRows(rows, scanConflict)
	if err != nil {
		return nil, wrap("read claim conflicts", err)
	}
	return out, nil
}

func scanConflict(row pgx.CollectableRow) (Violation, error) {
	var (
		v               Violation
		packet          int64
		user, reason    string
		claimed, foundT time.Time
	)
	if err := row.Scan(&v.EnvelopeID, &packet, &user, &reason, &claimed, &foundT); err != nil {
		return Violation{}, err
	}
	v.Check = CheckConflict
	v.Detail = fmt.Sprintf("claim of packet %d by user %q at %s could not be applied: %s (found %s)",
		packet, user, claimed.UTC().Format(time.RFC3339Nano), reason, foundT.UTC().Format(time.RFC3339))
	return v, nil
}
