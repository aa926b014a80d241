package dbadmin_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/dbadmin"
	"redpacket/internal/testenv"
)

// docQueries returns the SQL blocks of docs/dba.md: each is one query a DBA
// runs as written.
func docQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/dba.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?ms)^```sql\n(.*?)^```").FindAllStringSubmatch(string(b), -1)
	out := make([]string, 0, len(blocks))
	for _, m := range blocks {
		out = append(out, strings.TrimSpace(m[1]))
	}
	if len(out) < 8 {
		t.Fatalf("docs/dba.md has %d SQL blocks; want at least 8", len(out))
	}
	return out
}

// seed fills the ledger like a hundred days of use: 2,000 envelopes of 100
// packets (200,000 packets), after a year-old 800,000 unclaimed, 100 senders, 20,000 users; most envelopes
// settled, some open, some suspended; a few hundred claim conflicts. The
// example values of docs/dba.md (shop-42, u-1001, envelope 1001) are among
// them. Then ANALYZE, so the planner knows the sizes.
func (o *owner) seed() {
	o.t.Helper()
	// g % 20 = 0: open; g % 97 = 0: suspended; otherwise settled (60 of 100
	// packets claimed, the rest refunded).
	o.exec(`INSERT INTO envelopes (id, shard, share_code, sender_id, total_cents, count, status,
	        created_at, expires_at, settled_at, claimed_cents, refunded_cents, suspended_at, suspend_reason)
	    SELECT g, g % 16, 'c' || g, 'shop-' || g % 100, 10000, 100, s.status,
	        now() - (g % 100) * interval '1 day' - (g % 24) * interval '1 hour',
	        now() - (g % 100) * interval '1 day' + interval '1 day',
	        CASE WHEN s.status = 'settled' THEN now() - (g % 100) * interval '1 day' + interval '1 day' END,
	        CASE WHEN s.status = 'settled' THEN 6000 ELSE 3000 END,
	        CASE WHEN s.status = 'settled' THEN 4000 ELSE 0 END,
	        CASE WHEN s.status = 'suspended' THEN now() END,
	        CASE WHEN s.status = 'suspended' THEN 'redis holds no state for the envelope' END
	    FROM generate_series(1000, 2999) g
	    CROSS JOIN LATERAL (SELECT CASE WHEN g % 20 = 0 THEN 'open' WHEN g % 97 = 0 THEN 'suspended'
	                                    ELSE 'settled' END AS status) s`)
	o.exec(`INSERT INTO packets (id, envelope_id, amount_cents, claimed_by, claimed_at, order_no, refunded_at)
	    SELECT e.id * 1000 + i, e.id, 100,
	        CASE WHEN i <= e.claimed_cents / 100 THEN 'u-' || (e.id * 7 + i * 13) % 20000 END,
	        CASE WHEN i <= e.claimed_cents / 100 THEN e.created_at + i * interval '1 minute' END,
	        CASE WHEN i <= e.claimed_cents / 100 THEN 'o' || (e.id * 1000 + i) END,
	        CASE WHEN i > e.claimed_cents / 100 AND e.status = 'settled' THEN e.settled_at END
	    FROM envelopes e, generate_series(1, 100) i
	    -- As the flusher appends claims: in claim-time order.
	    ORDER BY e.created_at + i * interval '1 minute', e.id, i`)
	// And a year before them, 2,000 envelopes of 400 packets that nobody
	// grabbed, refunded: a ledger with a history, whose packets a query of
	// recent days must not read whole.
	o.exec(`INSERT INTO envelopes (id, shard, share_code, sender_id, total_cents, count, status,
	        created_at, expires_at, settled_at, claimed_cents, refunded_cents)
	    SELECT g, g % 16, 'c' || g, 'shop-' || g % 100, 40000, 400, 'settled',
	        now() - interval '400 days' + (g % 100) * interval '1 day', now() - interval '399 days' + (g % 100) * interval '1 day',
	        now() - interval '399 days' + (g % 100) * interval '1 day', 0, 40000
	    FROM generate_series(3000, 4999) g`)
	o.exec(`INSERT INTO packet_pool (id, envelope_id, amount_cents, refunded_at)
	    SELECT e.id * 1000 + i, e.id, 100, e.settled_at
	    FROM envelopes e, generate_series(1, 400) i WHERE e.id >= 3000 ORDER BY e.id, i`)
	o.exec(`INSERT INTO claim_conflicts (envelope_id, packet_id, user_id, claimed_at, reason, found_at)
	    SELECT e.id, e.id * 1000 + 1, 'u-x' || e.id, e.created_at, 'claimed_by_another_user', e.created_at
	    FROM envelopes e WHERE e.id % 7 = 0`)
	o.exec(`ANALYZE`)
}

// Every query of docs/dba.md runs as the read-only role, and none reads
// packets by a sequential scan on a ledger of some size.
func TestDocQueries(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	o := newOwner(t)
	o.seed()
	role := testenv.Name("rp_doc_")
	ro := o.newRole(role)
	if err := dbadmin.Grant(ctx, o.pool, role); err != nil {
		t.Fatal(err)
	}

	// The check can fail: on this data a filter no index serves reads
	// packets whole.
	if plan := explain(t, ro, "SELECT * FROM packets WHERE amount_cents = 5"); !seqScansPackets(plan) {
		t.Fatalf("control query reads packets without a sequential scan: the data is too small to tell\n%s", plan)
	}
	queries := docQueries(t)
	for i, q := range queries {
		rows, err := ro.Query(ctx, q)
		n := 0
		if err == nil {
			for rows.Next() {
				n++
			}
			err = rows.Err()
		}
		if err != nil {
			t.Errorf("query %d as the read-only role: %v\n%s", i+1, err, q)
			continue
		}
		if plan := explain(t, ro, q); seqScansPackets(plan) {
			t.Errorf("query %d reads packets by a sequential scan:\n%s\n%s", i+1, q, plan)
		}
		t.Logf("query %d: %d rows", i+1, n)
	}

	// The index the migration added for them is what keeps them so:
	// without it, some query scans packets.
	tx, err := o.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // rolled back on purpose
	if _, err := tx.Exec(ctx, "DROP INDEX claims_claimed_at_idx"); err != nil {
		t.Fatal(err)
	}
	scans := 0
	for _, q := range queries {
		if seqScansPackets(explain(t, tx, q)) {
			scans++
		}
	}
	if scans == 0 {
		t.Errorf("without claims_claimed_at_idx no query of docs/dba.md scans packets: the index serves none")
	}
}

// seqScansPackets: the plan reads either table under the packets view
// whole.
func seqScansPackets(plan string) bool {
	return strings.Contains(plan, "Seq Scan on packet_pool") || strings.Contains(plan, "Seq Scan on claims")
}

// queryer is a connection or a transaction.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// explain returns the text plan of a query.
func explain(t *testing.T, c queryer, q string) string {
	t.Helper()
	rows, err := c.Query(t.Context(), "EXPLAIN "+q)
	if err != nil {
		t.Fatalf("EXPLAIN: %v\n%s", err, q)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("EXPLAIN: %v\n%s", err, q)
	}
	return strings.Join(lines, "\n")
}
