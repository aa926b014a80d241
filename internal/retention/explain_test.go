package retention

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/db/dbsqlc"
	"redpacket/internal/testenv"
)

// copyInner is the query inside a RetentionCopy statement.
var copyInner = regexp.MustCompile(`(?s)COPY \((.*)\) TO STDOUT`)

// On 2,000 envelopes of 100 packets with an event per claim, five
// recipients and an idempotency key, most of them due, every
// statement of a batch reads packets, events, envelopes and keys through their
// indexes, never by a sequential scan: a run's cost follows what it
// removes, not the size of the ledger.
func TestRetentionStatementsUseIndexes(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	// One envelope in ten is open, the rest settled an hour apart up to now.
	exec(t, pool, `INSERT INTO envelopes (id, shard, sender_id, total_cents, count, status, created_at, expires_at,
            settled_at, claimed_cents, refunded_cents)
        SELECT g, g % 16, 's', 10000, 100, CASE WHEN g % 10 = 0 THEN 'open' ELSE 'settled' END,
            $1::timestamptz - (2000 - g) * interval '1 hour', $1,
            CASE WHEN g % 10 <> 0 THEN $1::timestamptz - (2000 - g) * interval '1 hour' END,
            CASE WHEN g % 10 = 0 THEN 0 ELSE 5000 END, CASE WHEN g % 10 = 0 THEN 0 ELSE 5000 END
        FROM generate_series(1, 2000) g`, now)
	exec(t, pool, `INSERT INTO packets (id, envelope_id, amount_cents, claimed_by, claimed_at, refunded_at)
        SELECT e * 1000 + i, e, 100, CASE WHEN i <= 50 THEN 'u' || i END, CASE WHEN i <= 50 THEN now() END,
            CASE WHEN e % 10 <> 0 AND i > 50 THEN now() END
        FROM generate_series(1, 2000) e, generate_series(1, 100) i ORDER BY e, i`)
	exec(t, pool, `INSERT INTO events (id, type, envelope_id, packet_id, delivered_at)
        SELECT p.id, 'packet.claimed', p.envelope_id, p.id, now() FROM packets p WHERE p.claimed_by IS NOT NULL`)
	exec(t, pool, `INSERT INTO envelope_recipients (envelope_id, user_id) SELECT g, 'u' || i
        FROM generate_series(1, 2000) g, generate_series(1, 5) i`)
	exec(t, pool, `INSERT INTO split_commitments (envelope_id, salt, commitment)
        SELECT g, repeat('0', 64), repeat('f', 64) FROM generate_series(1, 2000) g`)
	// A key a create made for every envelope, one in a hundred unanswered.
	exec(t, pool, `INSERT INTO idempotency_keys (client_name, idem_key, request_sha256, envelope_id, created_at,
            expires_at, response_status, response_body)
        SELECT '', 'k' || g, sha256(g::text::bytea), g, $1::timestamptz - interval '30 days', $1::timestamptz + interval '1 day',
            CASE WHEN g % 100 <> 0 THEN 201 END, CASE WHEN g % 100 <> 0 THEN '{}'::bytea END
        FROM generate_series(1, 2000) g`, now)
	exec(t, pool, `ANALYZE`)
	ids := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 11}
	plans := map[string]string{
		"lock": explain(t, pool, nil, dbsqlc.RetentionLockBatch, now.Add(-24*time.Hour), now.Add(-1000*time.Hour), []int64{},
			now, true, int32(DefaultBatch)),
		"due":    explain(t, pool, nil, dbsqlc.RetentionDue, now.Add(-24*time.Hour), now, true, int32(DefaultBatch)),
		"delete": explain(t, pool, nil, dbsqlc.RetentionDelete, ids, now.Add(-24*time.Hour)),
	}
	for _, tb := range tables {
		plans["copy "+tb.name] = explain(t, pool, ids, copyInner.FindStringSubmatch(tb.copy)[1])
	}
	for name, plan := range plans {
		for _, table := range []string{"packets", "events", "envelopes", "envelope_recipients", "split_commitments",
			"idempotency_keys"} {
			if strings.Contains(plan, "Seq Scan on "+table) {
				t.Errorf("%s reads %s by a sequential scan:\n%s", name, table, plan)
			}
		}
	}
	// Sorted, a batch would read every envelope due to lock a hundred.
	if strings.Contains(plans["lock"], "Sort") {
		t.Errorf("the lock sorts the envelopes due:\n%s", plans["lock"])
	}
}

// explain returns the plan of query for args; with batch, after naming the
// batch as the RetentionCopy statements read it.
func explain(t *testing.T, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, batch []int64, query string, args ...any) string {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // read only
	if batch != nil {
		if err := dbsqlc.New(tx).RetentionSetBatch(t.Context(), batch); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := tx.Query(t.Context(), "EXPLAIN "+query, args...)
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", query, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
