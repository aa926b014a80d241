package audit

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/db/dbsqlc"
)

// TestPageQueryUsesPacketsIndex keeps the finding documented at readPage:
// on 2,000 envelopes of 100 packets each, a page's packets are read through
// packet_pool_envelope_idx and their claims through an index of claims led
// by the envelope, never by a sequential scan of either.
func TestPageQueryUsesPacketsIndex(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	// One envelope in ten is open, the rest settled; created an hour apart.
	d.exec(`INSERT INTO envelopes (id, shard, sender_id, total_cents, count, status,
		    created_at, expires_at, settled_at, claimed_cents, refunded_cents)
		SELECT g, g % 16, 's', 10000, 100, CASE WHEN g % 10 = 0 THEN 'open' ELSE 'settled' END,
		    now() - (2000 - g) * interval '1 hour', now() + interval '1 hour',
		    CASE WHEN g % 10 = 0 THEN NULL ELSE now() END,
		    CASE WHEN g % 10 = 0 THEN 0 ELSE 5000 END, CASE WHEN g % 10 = 0 THEN 0 ELSE 5000 END
		FROM generate_series(1, 2000) g`)
	d.exec(`INSERT INTO packets (id, envelope_id, amount_cents, claimed_by, claimed_at, refunded_at)
		SELECT e * 1000 + i, e, 100,
		    CASE WHEN e % 10 <> 0 AND i <= 50 THEN 'u' || i END,
		    CASE WHEN e % 10 <> 0 AND i <= 50 THEN now() END,
		    CASE WHEN e % 10 <> 0 AND i > 50 THEN now() END
		FROM generate_series(1, 2000) e, generate_series(1, 100) i ORDER BY e, i`)
	d.exec(`ANALYZE envelopes, packet_pool, claims`)

	since := time.Now().Add(-100 * time.Hour)
	for _, tc := range []struct {
		name  string
		query string
		args  []any
	}{
		{"all, first page", dbsqlc.AuditPage, []any{int64(0), DefaultPageSize}},
		{"all, last page", dbsqlc.AuditPage, []any{int64(1500), DefaultPageSize}},
		{"since", dbsqlc.AuditPageSince, []any{int64(0), since, DefaultPageSize}},
	} {
		plan := d.explain(tc.query, tc.args...)
		if strings.Contains(plan, "Seq Scan on packet_pool") || !strings.Contains(plan, "packet_pool_envelope_idx") {
			t.Errorf("%s: packets not read through packet_pool_envelope_idx:\n%s", tc.name, plan)
		}
		if strings.Contains(plan, "Seq Scan on claims") || !strings.Contains(plan, "claims_pkey") {
			t.Errorf("%s: claims not read through an index led by the envelope:\n%s", tc.name, plan)
		}
		if tc.query == dbsqlc.AuditPage && !strings.Contains(plan, "Index Scan using envelopes_pkey") {
			t.Errorf("%s: page not read through envelopes_pkey:\n%s", tc.name, plan)
		}
	}
	// The window's orphan query reads the large tables from the window's
	// first envelope on, through an index led by envelope_id (the empty ones
	// here are read whole, rightly).
	plan := d.explain(dbsqlc.AuditOrphans, 500, int64(1900)) // max_rows, min_envelope_id
	for _, table := range []string{"packet_pool", "claims"} {
		if strings.Contains(plan, "Seq Scan on "+table) {
			t.Errorf("orphans in the window: %s read whole:\n%s", table, plan)
		}
	}
	// And the query's answer on that data is clean.
	if rep := d.runPG(Options{}); !rep.OK() || rep.Checked != 2000 || rep.Packets != 200000 {
		t.Errorf("report on the EXPLAIN data: checked %d, packets %d, %d violations",
			rep.Checked, rep.Packets, len(rep.Violations))
	}
}

// explain returns the text plan of a query for the arguments.
func (d *db) explain(query string, args ...any) string {
	d.t.Helper()
	rows, err := d.pool.Query(d.ctx, "EXPLAIN "+query, args...)
	if err != nil {
		d.t.Fatalf("EXPLAIN: %v", err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		d.t.Fatalf("EXPLAIN: %v", err)
	}
	return strings.Join(lines, "\n")
}
