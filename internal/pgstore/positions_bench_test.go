package pgstore_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/db/dbsqlc"
)

// protoPositionsSchema gives today's packets the column and index claim
// events read from the claims would need: the claim's event position
// (unique, so the feed reads claims in position order by an index).
// feedPages reads pages random windows of 100 positions, the claim events
// of a feed page, from the lean table's BRIN index (proto_claims_copyp), its
// B-tree twin (proto_claims_copypb, the same positions) and from the shipped
// feed (its statement, EventsAfter: 100 events after a position of a claim
// event the shipped design wrote), and returns the mean time of a page of
// each. Positions are gap-free, so a window of 100 positions holds at most
// 100 events: the bounded range keeps a BRIN read from scanning every range
// above it.
func feedPages(b *testing.B, pool *pgxpool.Pool, pages int) (brin, btree, shipped time.Duration) {
	b.Helper()
	ctx := b.Context()
	// The steady state: autovacuum summarizes each filled range
	// (autosummarize) and keeps the statistics.
	for _, q := range []string{`SELECT brin_summarize_new_values('proto_claims_copyp_position_idx')`,
		`ANALYZE proto_claims_copyp`, `ANALYZE proto_claims_copypb`, `ANALYZE events`, `ANALYZE packet_pool`, `ANALYZE claims`} {
		if _, err := pool.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	// Each window starts at a position the table holds: the designs'
	// positions come from one sequence, so each table's have gaps.
	read := func(q, starts string, args func(from int64) []any) time.Duration {
		var from []int64
		if err := pool.QueryRow(ctx, `SELECT array_agg(x) FROM (`+starts+` ORDER BY random() LIMIT $1) s(x)`,
			pages).Scan(&from); err != nil {
			b.Fatal(err)
		}
		var spent time.Duration
		for _, f := range from {
			start := time.Now()
			rows, err := pool.Query(ctx, q, args(f)...)
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
	window100 := func(from int64) []any { return []any{from, from + 99} }
	brin = read(claimed+`proto_claims_copyp`+window, `SELECT claim_event_id FROM proto_claims_copyp`, window100)
	btree = read(claimed+`proto_claims_copypb`+window, `SELECT claim_event_id FROM proto_claims_copypb`, window100)
	shipped = read(dbsqlc.EventsAfter, `SELECT p FROM claim_event_runs r, generate_series(r.first_position, r.last_position) p`,
		func(from int64) []any { return []any{from - 1, int32(100)} })
	return brin, btree, shipped
}
