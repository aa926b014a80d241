package retention

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/testenv"
)

// TestMain fails the package when a test leaves a goroutine running.
func TestMain(m *testing.M) { testenv.VerifyNoLeaks(m) }

// now is the instant the tests' runs take as the present.
var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// seed writes envelope id with n packets (the first half claimed, the rest
// refunded when settled; none claimed and all refunded when failed, given
// up while loading), in status, settled (when status is settled or failed)
// at settledAt; with an event per claim and a settled event, a recipient, a
// split commitment and a claim conflict, so every per-envelope table has
// rows. It returns the envelope's total.
func seed(t testing.TB, pool *pgxpool.Pool, id int64, n int, status string, settledAt time.Time) int64 {
	t.Helper()
	ctx := context.Background()
	settled := status == "settled" || status == "failed"
	claimedN := n / 2
	if status == "failed" {
		claimedN = 0
	}
	var total int64
	err := pool.QueryRow(ctx, `
WITH p AS (
    INSERT INTO packets (id, envelope_id, amount_cents, claimed_by, claimed_at, order_no, refunded_at)
    SELECT $1 * 100000 + i, $1, 100 + i % 7,
           CASE WHEN i <= $5 THEN 'u' || i END, CASE WHEN i <= $5 THEN $4::timestamptz - interval '1 hour' END,
           CASE WHEN i <= $5 THEN 'o' || $1 || '-' || i END,
           CASE WHEN i > $5 AND $3 THEN $4::timestamptz END
    FROM generate_series(1, $2) i
    RETURNING amount_cents, claimed_by)
SELECT sum(amount_cents)::bigint FROM p`, id, n, settled, settledAt, claimedN).Scan(&total)
	if err != nil {
		t.Fatal(err)
	}
	var claimed int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(amount_cents), 0)::bigint FROM packets WHERE envelope_id = $1 AND claimed_by IS NOT NULL`,
		id).Scan(&claimed); err != nil {
		t.Fatal(err)
	}
	refunded, at := total-claimed, &settledAt
	if !settled {
		refunded, at = 0, nil
	}
	exec(t, pool, `INSERT INTO envelopes (id, shard, share_code, sender_id, total_cents, count, status, created_at, expires_at,
        settled_at, claimed_cents, refunded_cents, recipients_count, greeting, metadata, password_digest)
        VALUES ($1::bigint, $1::bigint % 16, 'sc' || $1::bigint, 'sender', $2, $3, $4, $5::timestamptz - interval '2 hours',
        $5::timestamptz - interval '1 minute', $6, $7, $8, 1, E'tab\there, new\nline \\ and ''quote''', '{"campaign": "a\"b"}',
        repeat('ab', 32))`, id, total, n, status, settledAt, at, claimed, refunded)
	exec(t, pool, `INSERT INTO envelope_recipients (envelope_id, user_id) VALUES ($1, 'u1')`, id)
	exec(t, pool, `INSERT INTO split_commitments (envelope_id, salt, commitment) VALUES ($1, repeat('0', 64), repeat('f', 64))`, id)
	exec(t, pool, `INSERT INTO events (id, type, envelope_id, packet_id, data, created_at)
        SELECT $1 * 100000 + p.id % 100000, 'packet.claimed', $1, p.id, NULL, p.claimed_at
        FROM packets p WHERE p.envelope_id = $1 AND p.claimed_by IS NOT NULL`, id)
	exec(t, pool, `INSERT INTO events (id, type, envelope_id, data, delivered_at) VALUES ($1::bigint * 100000 + 99999, 'envelope.settled', $1::bigint,
        '{"x": 1}', $2)`, id, settledAt)
	exec(t, pool, `INSERT INTO claim_conflicts (envelope_id, packet_id, user_id, claimed_at, reason)
        VALUES ($1::bigint, $1::bigint * 100000 + 1, 'intruder', $2, 'claimed_by_other')`, id, settledAt)
	return total
}

// asRun turns the packet.claimed events rows seed wrote for an envelope
// into one run of claim events, as the flusher writes them: the same
// positions (seed numbers them after the packets), the packets in that order.
func asRun(t testing.TB, pool *pgxpool.Pool, id int64) {
	t.Helper()
	exec(t, pool, `WITH gone AS (DELETE FROM events WHERE envelope_id = $1 AND type = 'packet.claimed' RETURNING id, packet_id, created_at)
        INSERT INTO claim_event_runs (first_position, last_position, envelope_id, packet_ids, created_at, delivered_through)
        SELECT min(id), max(id), $1, array_agg(packet_id ORDER BY id), min(created_at), min(id) - 1 FROM gone`, id)
}

func exec(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// count is the rows of each per-envelope table for the envelopes ids.
func count(t testing.TB, pool *pgxpool.Pool, ids ...int64) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, tb := range tables {
		col := "envelope_id"
		if tb.name == "envelopes" {
			col = "id"
		}
		var n int64
		if err := pool.QueryRow(context.Background(), fmt.Sprintf("SELECT count(*) FROM %s WHERE %s = ANY($1)", tb.name, col),
			ids).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[tb.name] = n
	}
	return out
}

// options are a run's options at now, archiving into a new directory.
func options(t testing.TB, age time.Duration) Options {
	return Options{OlderThan: age, Dir: t.TempDir(), Now: func() time.Time { return now }, Batch: 2}
}

// sets lists the file sets in dir.
func sets(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*", manifestName))
	if err != nil {
		t.Fatal(err)
	}
	for i := range m {
		m[i] = filepath.Dir(m[i])
	}
	return m
}

func readFile(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
