package migrations_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Envelopes claimed before migration 15 get their luckiest grab on their row
// from the packets they already hold: the same answer best_claim gave
// before, ties going to the first handed out (the highest id), none for an
// envelope without claims or of the fixed kind.
func TestBestClaimSurvivesTheMoveToTheEnvelopeRow(t *testing.T) {
	t.Parallel()
	m, dbURL := downTo(t, 14)
	ctx := t.Context()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	for _, q := range []string{
		`INSERT INTO envelopes (id, shard, sender_id, total_cents, count, status, expires_at, claimed_cents, kind)
		 VALUES (1, 1, 's', 30, 4, 'open', now(), 23, 'random'), (2, 2, 's', 10, 2, 'open', now(), 0, 'random'),
		        (3, 3, 's', 10, 2, 'open', now(), 5, 'fixed')`,
		`INSERT INTO packets (id, envelope_id, amount_cents, claimed_by, claimed_at, order_no) VALUES
		 (100, 1, 7, NULL, NULL, NULL), (101, 1, 9, 'a', now(), 'o1'), (102, 1, 9, 'b', now(), 'o2'),
		 (103, 1, 5, 'c', now(), 'o3'), (200, 2, 5, NULL, NULL, NULL), (201, 2, 5, NULL, NULL, NULL),
		 (300, 3, 5, 'd', now(), 'o4'), (301, 3, 5, NULL, NULL, NULL)`,
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("seed: %v\n%s", err, q)
		}
	}
	before := bestClaims(t, c)
	if err := m.Up(); err != nil {
		t.Fatalf("up: %v", err)
	}
	after := bestClaims(t, c)
	want := map[int64]string{1: "102 b 9"}
	for id, w := range want {
		if before[id] != w || after[id] != w {
			t.Errorf("envelope %d: best %q before, %q after; want %q", id, before[id], after[id], w)
		}
	}
	for _, id := range []int64{2, 3} {
		if before[id] != "" || after[id] != "" {
			t.Errorf("envelope %d: best %q before, %q after; want none", id, before[id], after[id])
		}
	}
	var kept int64
	if err := c.QueryRow(ctx, `SELECT count(*) FROM envelopes WHERE id = 3 AND best_packet_id = 300`).Scan(&kept); err != nil || kept != 1 {
		t.Errorf("the fixed envelope's row keeps its best for best_claim to leave out: %d, %v", kept, err)
	}
}

func bestClaims(t *testing.T, c *pgx.Conn) map[int64]string {
	t.Helper()
	rows, err := c.Query(t.Context(), `SELECT e.id, b.packet_id || ' ' || b.user_id || ' ' || b.amount_cents
		FROM envelopes e CROSS JOIN LATERAL best_claim(e.id) b`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]string{}
	for rows.Next() {
		var id int64
		var s string
		if err := rows.Scan(&id, &s); err != nil {
			t.Fatal(err)
		}
		out[id] = s
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
