package audit

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/db/dbsqlc"
)

// readPage returns up to limit envelopes in scope with id > after, by id, and
// for each the aggregate of its packets (the queries AuditPage and
// AuditPageSince in internal/db/query/audit.sql). The envelope row and its
// aggregate come from one statement, so they are one snapshot and agree with
// each other even while the flusher writes; different pages may see
// different moments, which is harmless because every check is about one
// envelope.
//
// The aggregate is a LATERAL subquery per envelope, so PostgreSQL runs it as a
// nested loop driven by the page: each envelope's packets (the packets view)
// are found through packet_pool_envelope_idx and its claims through an
// index of claims led by the envelope, never by scanning either table. The
// page is a MATERIALIZED CTE so that it is planned on its own:
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
//	            -> Hash Left Join (packet_pool p, claims c on envelope and packet)
//	                 -> Bitmap Heap Scan on packet_pool p (packet_pool_envelope_idx: envelope_id = e.id)
//	                 -> Hash -> Bitmap Heap Scan on claims c (claims_pkey: envelope_id = e.id)
//
// (Before claims had a table of their own, one index scan of packets per
// envelope: about 20 ms for a page of 50,000 packets, on the first, middle
// and last pages alike.) With Since set, the
// page comes from a BitmapOr of envelopes_created_at_idx,
// envelopes_settled_at_idx and envelopes_unsettled_idx, sorted by id (a sequential scan when envelopes is
// small); the packets side is the same. Each such page re-reads the window's
// bitmap, which stays cheap for windows of a few hundred thousand envelopes.
// TestPageQueryUsesPacketsIndex keeps this true.
//
// users_twice counts claimed packets beyond each user's first and
// claimed_and_refunded the packets carrying both marks: constraints rule both
// out, which is exactly why the audit must not assume them.
func readPage(ctx context.Context, pool *pgxpool.Pool, since time.Time, after int64, limit int) ([]envelopeRow, error) {
	var out []envelopeRow
	what := fmt.Sprintf("read envelopes after %d", after)
	if after == math.MinInt64 {
		what = "read the first page of envelopes"
	}
	err := unbounded(ctx, pool, func(q *dbsqlc.Queries) error {
		if since.IsZero() {
			rows, err := q.AuditPage(ctx, dbsqlc.AuditPageParams{After: after, MaxRows: int32(limit)})
			for _, r := range rows {
				out = append(out, pageRow(dbsqlc.AuditPageSinceRow(r)))
			}
			return err
		}
		rows, err := q.AuditPageSince(ctx, dbsqlc.AuditPageSinceParams{After: after, Since: since, MaxRows: int32(limit)})
		for _, r := range rows {
			out = append(out, pageRow(r))
		}
		return err
	})
	if err != nil {
		return nil, wrap(what, err)
	}
	return out, nil
}

// unbounded runs fn's reads in a read-only transaction of their own that
// lifts a DBA's statement_timeout: a page reads hundreds of envelopes with
// every packet, which a limit set for the daemons' statements cut off at
// every run (the audit from cron failing for good). The audit's own
// -timeout bounds it instead.
func unbounded(ctx context.Context, pool *pgxpool.Pool, fn func(*dbsqlc.Queries) error) error {
	return pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		if err := q.LocalNoStatementTimeout(ctx); err != nil {
			return fmt.Errorf("lift statement_timeout: %w", err)
		}
		return fn(q)
	})
}

func pageRow(r dbsqlc.AuditPageSinceRow) envelopeRow {
	return envelopeRow{
		ID: r.ID, Status: r.Status, Count: int64(r.Count), TotalCents: r.TotalCents,
		ClaimedCents: r.ClaimedCents, RefundedCents: r.RefundedCents, HasSettledAt: r.HasSettledAt,
		Packets: packetTotals{
			N: r.N, Cents: r.Cents, ClaimedN: r.ClaimedN, ClaimedCents: r.PacketsClaimedCents,
			RefundedN: r.RefundedN, RefundedCents: r.PacketsRefundedCents,
			ClaimedAndRefunded: r.ClaimedAndRefunded, UsersTwice: r.UsersTwice,
			MinCents: r.MinCents, MaxCents: r.MaxCents, NotRecipient: r.NotRecipient, BeforeStart: r.BeforeStart,
			StrayClaims: r.StrayClaims,
		},
		Kind: r.Kind, RecipientsCount: int64(r.RecipientsCount), RecipientRows: r.RecipientRows,
	}
}

// maxOrphans bounds the orphan_rows violations one audit reports: past a
// few hundred, more lines tell the operator nothing new.
const maxOrphans = 500

// readOrphans returns one "orphan_rows" violation per table and missing
// envelope whose rows are still there: of the envelopes created at or after
// since (their ids from the window's first on), or of any envelope when
// since is zero.
func readOrphans(ctx context.Context, pool *pgxpool.Pool, since time.Time) ([]Violation, error) {
	from := int64(math.MinInt64)
	if !since.IsZero() {
		var err error
		if err = unbounded(ctx, pool, func(q *dbsqlc.Queries) (err error) {
			from, err = q.AuditFirstEnvelopeSince(ctx, since)
			return err
		}); err != nil {
			return nil, wrap("read the window's first envelope", err)
		}
	}
	var rows []dbsqlc.AuditOrphansRow
	err := unbounded(ctx, pool, func(q *dbsqlc.Queries) (err error) {
		rows, err = q.AuditOrphans(ctx, dbsqlc.AuditOrphansParams{MinEnvelopeID: from, MaxRows: maxOrphans})
		return err
	})
	if err != nil {
		return nil, wrap("read rows of missing envelopes", err)
	}
	out := make([]Violation, len(rows))
	for i, r := range rows {
		out[i] = Violation{EnvelopeID: r.EnvelopeID, Check: CheckOrphanRows,
			Detail: fmt.Sprintf("%d %s rows of an envelope that does not exist", r.N, r.Tbl)}
	}
	return out, nil
}

// readConflicts returns one "conflict" violation per claim_conflicts row
// found at or after since (every row when since is zero). claim_conflicts is
// small (every row is an incident), so it is read whole, without paging.
func readConflicts(ctx context.Context, pool *pgxpool.Pool, since time.Time) ([]Violation, error) {
	var rows []dbsqlc.AuditConflictsRow
	err := unbounded(ctx, pool, func(q *dbsqlc.Queries) (err error) {
		rows, err = q.AuditConflicts(ctx, since) // the zero time is before every row
		return err
	})
	if err != nil {
		return nil, wrap("read claim conflicts", err)
	}
	out := make([]Violation, len(rows))
	for i, r := range rows {
		out[i] = Violation{
			EnvelopeID: r.EnvelopeID,
			Check:      CheckConflict,
			Detail: fmt.Sprintf("claim of packet %d by user %q at %s could not be applied: %s (found %s)",
				r.PacketID, r.UserID, r.ClaimedAt.UTC().Format(time.RFC3339Nano), r.Reason,
				r.FoundAt.UTC().Format(time.RFC3339)),
		}
	}
	return out, nil
}
