package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/pgstore"
)

// protoPositionsSchema gives today's packets the column and index claim
// events read from the claims would need: the claim's event position
// (unique, so the feed reads claims in position order by an index).
var protoPositionsSchema = []string{
	`ALTER TABLE packets ADD COLUMN claim_event_id bigint`,
	`CREATE UNIQUE INDEX packets_claim_event_idx ON packets (claim_event_id) WHERE claim_event_id IS NOT NULL`,
}

// protoPositioned is today's claim write with claim events read from the
// claims: each claimed packet carries its event position, and only an
// envelope's sold-out event is a row of events. Positions stay gap-free
// because they are counted before the write from claims that cannot fail
// to apply: the batch's envelopes are locked first (protoLockEnvelopes, its
// own statement, so the claim statement's snapshot is taken after the lock
// and sees every claim committed before it).
func protoPositioned(b *testing.B, pool *pgxpool.Pool, indexed bool) func(context.Context, []pgstore.Claim) (int, error) {
	b.Helper()
	schema := protoPositionsSchema
	if !indexed {
		schema = schema[:1]
	}
	for _, q := range schema {
		if _, err := pool.Exec(b.Context(), q); err != nil {
			b.Fatalf("%v\n%s", err, q)
		}
	}
	return func(ctx context.Context, c []pgstore.Claim) (int, error) {
		return protoRunAfter(ctx, pool, protoLockEnvelopes, protoPositionedClaims, c)
	}
}

// protoLockEnvelopes locks a batch's envelopes in id order.
const protoLockEnvelopes = `SELECT id FROM envelopes WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE`

// protoPositionedClaims finds the claims that apply (their packets
// unclaimed, which the envelope locks keep true), takes one position for
// each and for each envelope they sell out, and writes the claims with
// their positions, the envelopes' sums and best, and the sold-out events.
var protoPositionedClaims = protoInput + `, eligible AS MATERIALIZED (
    SELECT i.envelope_id, i.packet_id, i.user_id, i.claimed_at, nullif(i.order_no, '') AS order_no, p.amount_cents,
           row_number() OVER (ORDER BY i.claimed_at, i.packet_id) AS rn
    FROM input i JOIN packets p ON p.id = i.packet_id
    WHERE (p.envelope_id = i.envelope_id AND p.claimed_by IS NULL AND p.refunded_at IS NULL) IS TRUE
), totals AS (
    SELECT DISTINCT ON (envelope_id) envelope_id, packet_id AS best_id, amount_cents AS best_cents,
           (sum(amount_cents) OVER w)::bigint AS cents
    FROM eligible WINDOW w AS (PARTITION BY envelope_id)
    ORDER BY envelope_id, amount_cents DESC, packet_id DESC
), sold AS MATERIALIZED (
    SELECT e.id, e.count, e.total_cents, row_number() OVER (ORDER BY e.id) AS rn
    FROM totals t JOIN envelopes e ON e.id = t.envelope_id
    WHERE e.status = 'open' AND e.claimed_cents + t.cents = e.total_cents
), base AS MATERIALIZED (
    SELECT (SELECT count(*) FROM eligible) AS claims,
           take_event_ids((SELECT count(*) FROM eligible) + (SELECT count(*) FROM sold)) AS b
), applied AS (
    UPDATE packets p
    SET claimed_by = el.user_id, claimed_at = el.claimed_at, order_no = el.order_no, claim_event_id = base.b + el.rn
    FROM eligible el CROSS JOIN base
    WHERE p.id = el.packet_id
    RETURNING p.id
), changed AS (
    ` + protoAddSumsTo("envelopes") + `
    FROM totals t WHERE e.id = t.envelope_id
), sold_events AS (
    INSERT INTO events (id, type, envelope_id, data)
    SELECT base.b + base.claims + s.rn, 'envelope.sold_out', s.id,
           jsonb_build_object('envelope_id', s.id, 'count', s.count, 'total_cents', s.total_cents)
    FROM sold s CROSS JOIN base
)
SELECT count(*)::int FROM applied`

// checkPositions fails the benchmark unless the claim positions and the
// event rows of pool's database are 1..n, each once: gap-free, as the feed
// promises.
func checkPositions(b *testing.B, pool *pgxpool.Pool) {
	b.Helper()
	var n, top int64
	if err := pool.QueryRow(b.Context(), `SELECT count(DISTINCT id), coalesce(max(id), 0) FROM (
		SELECT claim_event_id AS id FROM packets WHERE claim_event_id IS NOT NULL
		UNION ALL SELECT id FROM events) x`).Scan(&n, &top); err != nil {
		b.Fatal(err)
	}
	if n != top {
		b.Fatalf("claim positions and events: %d distinct, the highest %d: not 1..n each once", n, top)
	}
}

// feedPages reads pages random windows of 100 positions, the claim events
// of a feed page, from the lean table's BRIN index (proto_claims_copyp), its
// B-tree twin (proto_claims_copypb, the same positions) and from the shipped
// feed (event_messages, whose claim events the update
// design wrote), and returns the mean time of a page of each. Positions are
// gap-free, so a window of 100 positions holds at most 100 events: the
// bounded range keeps a BRIN read from scanning every range above it.
func feedPages(b *testing.B, pool *pgxpool.Pool, pages int) (brin, btree, shipped time.Duration) {
	b.Helper()
	ctx := b.Context()
	// The steady state: autovacuum summarizes each filled range
	// (autosummarize) and keeps the statistics.
	for _, q := range []string{`SELECT brin_summarize_new_values('proto_claims_copyp_position_idx')`,
		`ANALYZE proto_claims_copyp`, `ANALYZE proto_claims_copypb`, `ANALYZE events`, `ANALYZE packets`} {
		if _, err := pool.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	// Each window starts at a position the table holds: the designs'
	// positions come from one sequence, so each table's have gaps.
	read := func(q, starts string) time.Duration {
		var from []int64
		if err := pool.QueryRow(ctx, `SELECT array_agg(x) FROM (`+starts+` ORDER BY random() LIMIT $1) s(x)`,
			pages).Scan(&from); err != nil {
			b.Fatal(err)
		}
		var spent time.Duration
		for _, f := range from {
			start := time.Now()
			rows, err := pool.Query(ctx, q, f, f+99)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for rows.Next() {
				n++
			}
			if rows.Close(); rows.Err() != nil || n == 0 {
				b.Fatalf("feed page at %d: %d rows, %v", f, n, rows.Err())
			}
			spent += time.Since(start)
		}
		return spent / time.Duration(len(from))
	}
	const claimed = `SELECT packet_id, envelope_id, user_id, amount_cents, claimed_at, order_no, claim_event_id FROM `
	const window = ` WHERE claim_event_id BETWEEN $1 AND $2 ORDER BY claim_event_id`
	brin = read(claimed+`proto_claims_copyp`+window, `SELECT claim_event_id FROM proto_claims_copyp`)
	btree = read(claimed+`proto_claims_copypb`+window, `SELECT claim_event_id FROM proto_claims_copypb`)
	shipped = read(`SELECT id, type, envelope_id, data, created_at, attempts FROM event_messages
		WHERE id BETWEEN $1 AND $2 ORDER BY id`, `SELECT id FROM events WHERE type = 'packet.claimed'`)
	return brin, btree, shipped
}
