package migrations_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/pgstore"
)

// Migration 20 rewrites no claim: those written before it keep no sender,
// as do writes through the packets view, and a user's history still shows
// their envelope's; going down drops the column and the view's writes go
// on.
func TestClaimSendersKeepTheClaimsBefore(t *testing.T) {
	t.Parallel()
	m, dbURL := downTo(t, 19)
	c := connect(t, dbURL)
	ctx := t.Context()
	for _, q := range []string{
		`INSERT INTO envelopes (id, shard, sender_id, total_cents, count, status, expires_at, claimed_cents)
		 VALUES (1, 1, 'old-sender', 20, 2, 'open', now() + interval '1 day', 10),
		        (2, 2, 'new-sender', 20, 2, 'open', now() + interval '1 day', 0)`,
		`INSERT INTO packets (id, envelope_id, amount_cents, claimed_by, claimed_at, order_no)
		 VALUES (100, 1, 10, 'a', now(), '203005170000000001'), (101, 1, 10, NULL, NULL, NULL),
		        (200, 2, 10, NULL, NULL, NULL), (201, 2, 10, NULL, NULL, NULL)`,
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("seed: %v\n%s", err, q)
		}
	}
	if err := m.Up(); err != nil {
		t.Fatalf("up: %v", err)
	}
	if _, err := c.Exec(ctx, `UPDATE packets SET claimed_by = 'a', claimed_at = now() WHERE id = 201`); err != nil {
		t.Fatal(err)
	}
	const senders = `SELECT string_agg(packet_id || '=' || coalesce(sender_id, 'null'), ' ' ORDER BY packet_id) FROM claims`
	if got := strings.Join(queryStrings(t, c, senders), ""); got != "100=null 201=null" {
		t.Errorf("claims' senders after the upgrade: %s; want 100=null 201=null", got)
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	page, err := pgstore.New(pool).UserClaims(ctx, "a", 1<<62, 10)
	if err != nil || len(page) != 2 || page[0].SenderID != "new-sender" || page[1].SenderID != "old-sender" {
		t.Errorf("a's history = %+v, %v; want envelope 2 of new-sender, then 1 of old-sender", page, err)
	}

	if err := m.Migrate(19); err != nil {
		t.Fatalf("down: %v", err)
	}
	if _, err := c.Exec(ctx, `UPDATE packets SET claimed_by = 'b', claimed_at = now() WHERE id = 101`); err != nil {
		t.Fatalf("a write through the packets view at 19: %v", err)
	}
	if got := strings.Join(queryStrings(t, c, `SELECT string_agg(packet_id::text, ' ' ORDER BY packet_id) FROM claims`), ""); got != "100 101 201" {
		t.Errorf("claims at 19: %s; want 100 101 201", got)
	}
}
